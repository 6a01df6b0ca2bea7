// tests/kernels/gpu_test_util.hpp — device buffers for the [gpu] kernel tests: RAII
// cudaMalloc/cudaFree, upload/download of test::Buffer, and NaN poisoning of outputs (every
// byte 0xFF is NaN in f32, bf16 and f16), so an element a kernel forgets to write fails the
// never-NaN checks instead of passing on leftover data.
#pragma once

#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include "kernels/cuda_check.hpp"
#include "test_util.hpp"

namespace paralab::kernels::test {

class DevBuf {
 public:
  explicit DevBuf(size_t bytes) : bytes_(bytes) {
    PARALAB_CUDA_CHECK(cudaMalloc(&p_, bytes_ ? bytes_ : 1));
    poison();
  }
  explicit DevBuf(const Buffer& b) : DevBuf(b.bytes()) { upload(b.data()); }
  template <class T>
  explicit DevBuf(const std::vector<T>& v) : DevBuf(v.size() * sizeof(T)) {
    upload(v.data());
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() { cudaFree(p_); }

  void poison() { PARALAB_CUDA_CHECK(cudaMemset(p_, 0xFF, bytes_)); }
  void upload(const void* src) { PARALAB_CUDA_CHECK(cudaMemcpy(p_, src, bytes_, cudaMemcpyHostToDevice)); }
  void download(void* dst) const {
    PARALAB_CUDA_CHECK(cudaDeviceSynchronize());  // surfaces asynchronous kernel faults here
    PARALAB_CUDA_CHECK(cudaMemcpy(dst, p_, bytes_, cudaMemcpyDeviceToHost));
  }
  Buffer to_buffer(int64_t n, Dtype d) const {
    Buffer b(n, d);
    download(b.data());
    return b;
  }
  template <class T>
  std::vector<T> to_vector() const {
    std::vector<T> v(bytes_ / sizeof(T));
    download(v.data());
    return v;
  }
  void* get() { return p_; }
  float* f() { return static_cast<float*>(p_); }
  template <class T>
  T* as() { return static_cast<T*>(p_); }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// GPU-vs-CPU-twin tolerances (normwise relative, see test::rel_err): fp32 1e-5; bf16 1e-2;
// f16 2e-3 (one rounding of the stored output, 2^-11, plus margin).
inline double gpu_tol(Dtype d) {
  switch (d) {
    case Dtype::f32: return 1e-5;
    case Dtype::bf16: return 1e-2;
    case Dtype::f16: return 2e-3;
    default: return 0.0;
  }
}

// Host-side result of a device computation, as floats.
inline std::vector<float> dev_f32(const DevBuf& d, int64_t n, Dtype t) { return d.to_buffer(n, t).f32(); }

}  // namespace paralab::kernels::test
