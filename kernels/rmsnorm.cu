// kernels/rmsnorm.cu — CUDA RMSNorm forward/backward (formulas: rmsnorm.hpp).
// Same structure as layernorm.cu: one block per row, re-reads served from cache; dgamma by
// the deterministic column reduction, run before dx (dx may alias dy).
#include "kernels/cuda_utils.cuh"
#include "kernels/rmsnorm.hpp"

namespace paralab::kernels {
namespace {

using cu::ld;
using cu::st;

template <class T>
__global__ void rmsnorm_fwd_kernel(const T* x, const T* gamma, T* y, float* rrms_out,
                                   int64_t rows, int64_t cols, float eps) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    float q = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float v = ld(xr, c);
      q += v * v;
    }
    const float ms = cu::block_sum(q, scratch) / float(cols);
    const float rrms = 1.f / sqrtf(ms + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      st(yr, c, ld(xr, c) * rrms * ld(gamma, c));
    if (threadIdx.x == 0 && rrms_out != nullptr) rrms_out[r] = rrms;
  }
}

template <class T>
__global__ void rmsnorm_bwd_dx_kernel(const T* dy, const T* x, const T* gamma,
                                      const float* rrms, T* dx, int64_t rows, int64_t cols) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* dyr = dy + r * cols;
    const T* xr = x + r * cols;
    T* dxr = dx + r * cols;
    const float rr = rrms[r];
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      s += ld(dyr, c) * ld(gamma, c) * ld(xr, c);
    const float k = rr * rr * (cu::block_sum(s, scratch) / float(cols));
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      st(dxr, c, rr * (ld(dyr, c) * ld(gamma, c) - ld(xr, c) * k));
  }
}

template <class T>
struct RmsNormParamGrad {
  const T* dy;
  const T* x;
  const float* rrms;
  int64_t cols;
  __device__ void operator()(int64_t r, int64_t c, float& a0, float&) const {
    const int64_t i = r * cols + c;
    a0 += ld(dy, i) * (ld(x, i) * rrms[r]);
  }
};

}  // namespace

void rmsnorm_fwd_cuda(const RmsNormFwdArgs& a, cudaStream_t stream) {
  rmsnorm_fwd_check(a);
  cu::dispatch_float(a.dtype, "rmsnorm_fwd", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    rmsnorm_fwd_kernel<T><<<cu::grid_for(a.rows, 1), cu::row_block(a.cols), 0, stream>>>(
        static_cast<const T*>(a.x), static_cast<const T*>(a.gamma), static_cast<T*>(a.y),
        a.rrms, a.rows, a.cols, a.eps);
    PARALAB_CUDA_CHECK_LAUNCH();
  });
}

void rmsnorm_bwd_cuda(const RmsNormBwdArgs& a, cudaStream_t stream) {
  rmsnorm_bwd_check(a);
  cu::dispatch_float(a.dtype, "rmsnorm_bwd", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    const T* dy = static_cast<const T*>(a.dy);
    const T* x = static_cast<const T*>(a.x);
    if (a.dgamma != nullptr)
      cu::col_reduce(RmsNormParamGrad<T>{dy, x, a.rrms, a.cols}, a.rows, a.cols, a.dgamma,
                     nullptr, a.accumulate, stream);
    rmsnorm_bwd_dx_kernel<T><<<cu::grid_for(a.rows, 1), cu::row_block(a.cols), 0, stream>>>(
        dy, x, static_cast<const T*>(a.gamma), a.rrms, static_cast<T*>(a.dx), a.rows, a.cols);
    PARALAB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace paralab::kernels
