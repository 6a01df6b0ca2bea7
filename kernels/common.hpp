// kernels/common.hpp — shared plumbing of paralab::kernels: the error types, argument
// checks used by every CPU twin and CUDA launcher, and a CUDA-free declaration of
// cudaStream_t so that plain C++ (the executors) can call the CUDA launchers.
//
// Every kernel validates its arguments the same way on CPU and GPU (one `*_check` function
// per op, defined in the op's _cpu.cpp and called by both), so a bad call fails identically
// on both backends with a KernelError that names the kernel, the argument and the value.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

// Same type as the CUDA runtime's `typedef struct CUstream_st* cudaStream_t;` (redeclaring a
// type alias to the same type is legal C++), so including <cuda_runtime_api.h> later is fine.
struct CUstream_st;
using cudaStream_t = CUstream_st*;

namespace paralab::kernels {

// Bad arguments: null pointer with a nonzero size, non-positive size, unsupported dtype,
// out-of-range scalar. Message: "<kernel>: argument '<arg>' = <value> is invalid (<why>)".
class KernelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A failed CUDA runtime call (thrown by PARALAB_CUDA_CHECK in kernels/cuda_check.hpp). It is
// declared here, without CUDA headers, so host code can catch it; `code()` is the numeric
// cudaError_t. The executor adds its rank when it catches and rethrows.
class CudaError : public std::runtime_error {
 public:
  CudaError(int code, const std::string& expr, const std::string& file, int line,
            const std::string& what_cuda)
      : std::runtime_error(expr + " failed at " + file + ":" + std::to_string(line) + ": " +
                           what_cuda),
        code_(code), expr_(expr), file_(file), line_(line) {}
  int code() const noexcept { return code_; }
  const std::string& expr() const noexcept { return expr_; }
  const std::string& file() const noexcept { return file_; }
  int line() const noexcept { return line_; }

 private:
  int code_;
  std::string expr_;
  std::string file_;
  int line_;
};

namespace detail {

[[noreturn]] inline void fail_arg(const char* kernel, const char* arg, const std::string& value,
                                  const char* why) {
  throw KernelError(std::string(kernel) + ": argument '" + arg + "' = " + value +
                    " is invalid (" + why + ")");
}

// Sizes are element counts (int64_t); zero and negative sizes are rejected everywhere.
inline void check_positive(const char* kernel, const char* arg, int64_t v) {
  if (v <= 0) fail_arg(kernel, arg, std::to_string(v), "must be > 0");
}

// `needed` says whether the buffer is required for this call (e.g. sizes are nonzero).
inline void check_ptr(const char* kernel, const char* arg, const void* p, bool needed = true) {
  if (needed && p == nullptr) fail_arg(kernel, arg, "null", "must point to a buffer");
}

inline void check_finite(const char* kernel, const char* arg, double v) {
  if (!(v == v) || v > 1.7e308 || v < -1.7e308)
    fail_arg(kernel, arg, std::to_string(v), "must be finite");
}

inline void check_range(const char* kernel, const char* arg, double v, double lo, double hi,
                        const char* why) {
  if (!(v >= lo && v <= hi)) fail_arg(kernel, arg, std::to_string(v), why);
}

}  // namespace detail
}  // namespace paralab::kernels
