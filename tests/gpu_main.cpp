// Catch2 main for [gpu] test executables: runs the tests when a CUDA device is usable and
// exits 77 (ctest SKIP_RETURN_CODE) with a clear message when there is no device or driver.
#include "catch_session.hpp"
#include <cuda_runtime.h>
#include <cstdio>

int main(int argc, char* argv[]) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::fprintf(stderr, "[gpu] skipped: no usable CUDA device (%s)\n",
                 err != cudaSuccess ? cudaGetErrorString(err) : "device count is 0");
    return 77;
  }
  return paralab::test::run_catch_session(argc, argv);
}
