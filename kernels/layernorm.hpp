// kernels/layernorm.hpp — LayerNorm forward/backward over the last dimension.
//
// Source: Ba, Kiros & Hinton 2016, "Layer Normalization" (arXiv:1607.06450), Eq. 4, with the
// learned gain gamma and bias beta as in Megatron-LM's FusedLayerNorm:
//   mean_r = (1/C) sum_c x[r,c]
//   var_r  = (1/C) sum_c (x[r,c] - mean_r)^2          (biased variance, as PyTorch)
//   rstd_r = 1 / sqrt(var_r + eps)
//   y[r,c] = (x[r,c] - mean_r) * rstd_r * gamma[c] + beta[c]
// Backward, with xhat = (x - mean) * rstd and g = dy * gamma (derivation: chain rule through
// mean and rstd; same result as PyTorch's native_layer_norm_backward):
//   dx[r,c]   = rstd_r * (g[r,c] - mean_c'(g[r,c']) - xhat[r,c] * mean_c'(g[r,c'] xhat[r,c']))
//   dgamma[c] = sum_r dy[r,c] * xhat[r,c]
//   dbeta[c]  = sum_r dy[r,c]
// Shapes: x, y, dy, dx [rows, cols] row-major in `dtype`; gamma, beta [cols] in `dtype`;
// mean, rstd [rows] fp32 (saved by forward for backward); dgamma, dbeta [cols] fp32.
#pragma once

#include <cstdint>

#include "kernels/common.hpp"
#include "kernels/dtype.hpp"

namespace paralab::kernels {

struct LayerNormFwdArgs {
  const void* x = nullptr;      // [rows, cols] dtype
  const void* gamma = nullptr;  // [cols] dtype
  const void* beta = nullptr;   // [cols] dtype; null = no bias (beta = 0)
  void* y = nullptr;            // [rows, cols] dtype; may alias x
  float* mean = nullptr;        // [rows] fp32, out; null = not saved
  float* rstd = nullptr;        // [rows] fp32, out; null = not saved
  int64_t rows = 0;             // tokens (s*b)
  int64_t cols = 0;             // hidden size
  float eps = 1e-5f;            // > 0
  Dtype dtype = Dtype::f32;     // storage of x, y, gamma, beta
};

struct LayerNormBwdArgs {
  const void* dy = nullptr;     // [rows, cols] dtype
  const void* x = nullptr;      // [rows, cols] dtype, the forward input
  const void* gamma = nullptr;  // [cols] dtype
  const float* mean = nullptr;  // [rows] fp32 from forward
  const float* rstd = nullptr;  // [rows] fp32 from forward
  void* dx = nullptr;           // [rows, cols] dtype; may alias dy
  float* dgamma = nullptr;      // [cols] fp32; null = not computed
  float* dbeta = nullptr;       // [cols] fp32; null = not computed
  // true: dgamma/dbeta += this call's sums (gradient accumulation into the fp32 main-grad
  // buffer across micro-batches); false: they are overwritten.
  bool accumulate = false;
  int64_t rows = 0;
  int64_t cols = 0;
  Dtype dtype = Dtype::f32;     // storage of dy, x, gamma, dx
};

// Argument validation shared by both backends; throws KernelError.
void layernorm_fwd_check(const LayerNormFwdArgs& a);
void layernorm_bwd_check(const LayerNormBwdArgs& a);

// CPU twins (single-threaded; deterministic).
void layernorm_fwd_cpu(const LayerNormFwdArgs& a);
void layernorm_bwd_cpu(const LayerNormBwdArgs& a);

// CUDA launchers (pointers are device pointers; asynchronous on `stream`). Defined in
// paralab_kernels_cuda. dx may alias dy: the param-grad reduction runs before dx is written.
void layernorm_fwd_cuda(const LayerNormFwdArgs& a, cudaStream_t stream);
void layernorm_bwd_cuda(const LayerNormBwdArgs& a, cudaStream_t stream);

}  // namespace paralab::kernels
