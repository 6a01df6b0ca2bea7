// kernels/rmsnorm.hpp — RMSNorm forward/backward over the last dimension.
//
// Source: Zhang & Sennrich 2019, "Root Mean Square Layer Normalization" (NeurIPS), Eq. 4,
// with eps inside the root as in Megatron-LM / Llama:
//   rrms_r = 1 / sqrt((1/C) sum_c x[r,c]^2 + eps)
//   y[r,c] = x[r,c] * rrms_r * gamma[c]
// Backward (chain rule through rrms; d rrms / d x_c = -rrms^3 x_c / C), with g = dy * gamma:
//   dx[r,c]   = rrms_r * (g[r,c] - x[r,c] * rrms_r^2 * (1/C) sum_c' g[r,c'] x[r,c'])
//   dgamma[c] = sum_r dy[r,c] * x[r,c] * rrms_r
// Shapes: x, y, dy, dx [rows, cols] in `dtype`; gamma [cols] in `dtype`; rrms [rows] fp32;
// dgamma [cols] fp32.
#pragma once

#include <cstdint>

#include "kernels/common.hpp"
#include "kernels/dtype.hpp"

namespace paralab::kernels {

struct RmsNormFwdArgs {
  const void* x = nullptr;      // [rows, cols] dtype
  const void* gamma = nullptr;  // [cols] dtype
  void* y = nullptr;            // [rows, cols] dtype; may alias x
  float* rrms = nullptr;        // [rows] fp32, out (saved for backward); null = not saved
  int64_t rows = 0;
  int64_t cols = 0;
  float eps = 1e-5f;            // > 0
  Dtype dtype = Dtype::f32;
};

struct RmsNormBwdArgs {
  const void* dy = nullptr;     // [rows, cols] dtype
  const void* x = nullptr;      // [rows, cols] dtype
  const void* gamma = nullptr;  // [cols] dtype
  const float* rrms = nullptr;  // [rows] fp32 from forward
  void* dx = nullptr;           // [rows, cols] dtype; may alias dy
  float* dgamma = nullptr;      // [cols] fp32; null = not computed
  bool accumulate = false;      // dgamma += (true) or = (false)
  int64_t rows = 0;
  int64_t cols = 0;
  Dtype dtype = Dtype::f32;
};

void rmsnorm_fwd_check(const RmsNormFwdArgs& a);
void rmsnorm_bwd_check(const RmsNormBwdArgs& a);

void rmsnorm_fwd_cpu(const RmsNormFwdArgs& a);
void rmsnorm_bwd_cpu(const RmsNormBwdArgs& a);

void rmsnorm_fwd_cuda(const RmsNormFwdArgs& a, cudaStream_t stream);
void rmsnorm_bwd_cuda(const RmsNormBwdArgs& a, cudaStream_t stream);

}  // namespace paralab::kernels
