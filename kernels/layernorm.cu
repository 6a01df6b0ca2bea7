// kernels/layernorm.cu — CUDA LayerNorm forward/backward (formulas: layernorm.hpp).
//
// Forward: one block per row, three passes over the row (sum, centered sum of squares,
// normalize+store); passes 2 and 3 re-read the row, which is served from L1/L2, so device
// memory sees one read of x and one write of y. Backward: a deterministic column reduction
// for dgamma/dbeta (cu::col_reduce), then one block per row for dx (two passes).
#include "kernels/cuda_utils.cuh"
#include "kernels/layernorm.hpp"

namespace paralab::kernels {
namespace {

using cu::ld;
using cu::st;

template <class T>
__global__ void layernorm_fwd_kernel(const T* x, const T* gamma, const T* beta, T* y,
                                     float* mean_out, float* rstd_out, int64_t rows,
                                     int64_t cols, float eps) {
  __shared__ float scratch[32];
  const float inv_c = 1.f / float(cols);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += ld(xr, c);
    const float mean = cu::block_sum(s, scratch) * inv_c;
    float q = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float d = ld(xr, c) - mean;
      q += d * d;
    }
    const float var = cu::block_sum(q, scratch) * inv_c;
    const float rstd = 1.f / sqrtf(var + eps);
    // Each thread reads x[c] before writing y[c] at the same c: y may alias x.
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float b = beta != nullptr ? ld(beta, c) : 0.f;
      st(yr, c, (ld(xr, c) - mean) * rstd * ld(gamma, c) + b);
    }
    if (threadIdx.x == 0) {
      if (mean_out != nullptr) mean_out[r] = mean;
      if (rstd_out != nullptr) rstd_out[r] = rstd;
    }
  }
}

template <class T>
__global__ void layernorm_bwd_dx_kernel(const T* dy, const T* x, const T* gamma,
                                        const float* mean, const float* rstd, T* dx,
                                        int64_t rows, int64_t cols) {
  __shared__ float scratch[32];
  const float inv_c = 1.f / float(cols);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* dyr = dy + r * cols;
    const T* xr = x + r * cols;
    T* dxr = dx + r * cols;
    const float mu = mean[r], rs = rstd[r];
    float sg = 0.f, sgx = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float g = ld(dyr, c) * ld(gamma, c);
      sg += g;
      sgx += g * (ld(xr, c) - mu) * rs;
    }
    const float mg = cu::block_sum(sg, scratch) * inv_c;
    const float mgx = cu::block_sum(sgx, scratch) * inv_c;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float g = ld(dyr, c) * ld(gamma, c);
      const float xhat = (ld(xr, c) - mu) * rs;
      st(dxr, c, rs * (g - mg - xhat * mgx));
    }
  }
}

// dgamma[c] += dy*xhat, dbeta[c] += dy (summed over rows by cu::col_reduce).
template <class T>
struct LayerNormParamGrad {
  const T* dy;
  const T* x;
  const float* mean;
  const float* rstd;
  int64_t cols;
  __device__ void operator()(int64_t r, int64_t c, float& a0, float& a1) const {
    const int64_t i = r * cols + c;
    const float d = ld(dy, i);
    a0 += d * ((ld(x, i) - mean[r]) * rstd[r]);
    a1 += d;
  }
};

}  // namespace

void layernorm_fwd_cuda(const LayerNormFwdArgs& a, cudaStream_t stream) {
  layernorm_fwd_check(a);
  cu::dispatch_float(a.dtype, "layernorm_fwd", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    layernorm_fwd_kernel<T><<<cu::grid_for(a.rows, 1), cu::row_block(a.cols), 0, stream>>>(
        static_cast<const T*>(a.x), static_cast<const T*>(a.gamma),
        static_cast<const T*>(a.beta), static_cast<T*>(a.y), a.mean, a.rstd, a.rows, a.cols,
        a.eps);
    PARALAB_CUDA_CHECK_LAUNCH();
  });
}

void layernorm_bwd_cuda(const LayerNormBwdArgs& a, cudaStream_t stream) {
  layernorm_bwd_check(a);
  cu::dispatch_float(a.dtype, "layernorm_bwd", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    const T* dy = static_cast<const T*>(a.dy);
    const T* x = static_cast<const T*>(a.x);
    // Param grads first: they read dy, which dx may overwrite.
    if (a.dgamma != nullptr || a.dbeta != nullptr)
      cu::col_reduce(LayerNormParamGrad<T>{dy, x, a.mean, a.rstd, a.cols}, a.rows, a.cols,
                     a.dgamma, a.dbeta, a.accumulate, stream);
    layernorm_bwd_dx_kernel<T><<<cu::grid_for(a.rows, 1), cu::row_block(a.cols), 0, stream>>>(
        dy, x, static_cast<const T*>(a.gamma), a.mean, a.rstd, static_cast<T*>(a.dx), a.rows,
        a.cols);
    PARALAB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace paralab::kernels
