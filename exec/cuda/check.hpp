// paralab exec/cuda — every CUDA runtime, cuBLASLt and NCCL call of the backend goes through one
// of these macros: a failure throws CallError "<call> failed at <file>:<line>: <library's
// error name and string>"; the runtime adds the op and the rank ("rank r: error: op ... failed:
// ..."), setup code wraps it into an ExecError naming the rank. Host-only header (g++).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <stdexcept>
#include <string>

namespace paralab::exec::cuda {

class CallError : public std::runtime_error {
 public:
  CallError(const std::string& call, const char* file, int line, const std::string& why, int code)
      : std::runtime_error(call + " failed at " + file + ":" + std::to_string(line) + ": " + why), code_(code) {}
  [[nodiscard]] int code() const { return code_; }

 private:
  int code_;
};

[[noreturn]] inline void throw_cuda(cudaError_t e, const char* call, const char* file, int line) {
  throw CallError(call, file, line, std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e), static_cast<int>(e));
}
[[noreturn]] inline void throw_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
  throw CallError(call, file, line, std::string(cublasLtGetStatusName(s)) + ": " + cublasLtGetStatusString(s),
                  static_cast<int>(s));
}
[[noreturn]] inline void throw_nccl(ncclResult_t r, const char* call, const char* file, int line) {
  const char* last = ncclGetLastError(nullptr);
  throw CallError(call, file, line,
                  std::string(ncclGetErrorString(r)) + (last && *last ? std::string(" (") + last + ")" : std::string()),
                  static_cast<int>(r));
}

}  // namespace paralab::exec::cuda

#define PARALAB_CU(expr)                                                                      \
  do {                                                                                        \
    const cudaError_t paralab_e_ = (expr);                                                    \
    if (paralab_e_ != cudaSuccess) ::paralab::exec::cuda::throw_cuda(paralab_e_, #expr, __FILE__, __LINE__); \
  } while (0)

#define PARALAB_CUBLAS(expr)                                                                  \
  do {                                                                                        \
    const cublasStatus_t paralab_s_ = (expr);                                                 \
    if (paralab_s_ != CUBLAS_STATUS_SUCCESS)                                                  \
      ::paralab::exec::cuda::throw_cublas(paralab_s_, #expr, __FILE__, __LINE__);             \
  } while (0)

#define PARALAB_NCCL(expr)                                                                    \
  do {                                                                                        \
    const ncclResult_t paralab_r_ = (expr);                                                   \
    if (paralab_r_ != ncclSuccess) ::paralab::exec::cuda::throw_nccl(paralab_r_, #expr, __FILE__, __LINE__); \
  } while (0)
