// kernels/cuda_check.hpp — PARALAB_CUDA_CHECK: turn a failed CUDA runtime call into a
// paralab::kernels::CudaError carrying the expression text, file:line and the CUDA error
// string. Include only from CUDA-aware code (it pulls in <cuda_runtime_api.h>, a plain C
// header that g++ can parse, so host .cpp files such as the GPU tests may use it too).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/common.hpp"

namespace paralab::kernels::detail {
[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* expr, const char* file,
                                          int line) {
  throw CudaError(int(err), expr, file, line,
                  std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err));
}
}  // namespace paralab::kernels::detail

#define PARALAB_CUDA_CHECK(expr)                                                         \
  do {                                                                                   \
    const cudaError_t paralab_cuda_err_ = (expr);                                        \
    if (paralab_cuda_err_ != cudaSuccess)                                                \
      ::paralab::kernels::detail::throw_cuda_error(paralab_cuda_err_, #expr, __FILE__,   \
                                                   __LINE__);                            \
  } while (0)

// After every kernel launch: launch-configuration errors surface here, synchronously.
#define PARALAB_CUDA_CHECK_LAUNCH() PARALAB_CUDA_CHECK(cudaGetLastError())
