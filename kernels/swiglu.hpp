// kernels/swiglu.hpp — SwiGLU activation forward/backward.
//
// Source: Shazeer 2020, "GLU Variants Improve Transformer" (arXiv:2002.05202), Eq. 5
// (FFN_SwiGLU with Swish_1 = SiLU), laid out as Megatron-LM's fused swiglu: the input row
// holds the gate half then the up half (torch.chunk(x, 2, dim=-1)):
//   a = x[r, c], b = x[r, f + c]               for c in [0, f)
//   y[r, c] = silu(a) * b,   silu(a) = a * sigmoid(a)     (Elfwing et al. 2018)
// Backward:
//   dx[r, c]     = dy * b * sigmoid(a) * (1 + a * (1 - sigmoid(a)))     (d/da silu(a) * b)
//   dx[r, f + c] = dy * silu(a)
// Shapes: x, dx [rows, 2f] in `dtype`; y, dy [rows, f] in `dtype`.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common.hpp"
#include "kernels/dtype.hpp"

namespace paralab::kernels {

// Shared fp32 math (CPU twin and CUDA kernel). expf(-a) overflows to +Inf for a < -88,
// giving sigmoid = 0 exactly, never NaN.
PARALAB_HD float sigmoidf_(float a) { return 1.f / (1.f + expf(-a)); }
PARALAB_HD float silu(float a) { return a * sigmoidf_(a); }
PARALAB_HD float silu_grad(float a) {
  const float s = sigmoidf_(a);
  return s * (1.f + a * (1.f - s));
}

struct SwigluFwdArgs {
  const void* x = nullptr;  // [rows, 2*f] dtype: gate half, then up half
  void* y = nullptr;        // [rows, f] dtype
  int64_t rows = 0;
  int64_t f = 0;            // output features (ffn hidden size per TP rank)
  Dtype dtype = Dtype::f32;
};

struct SwigluBwdArgs {
  const void* dy = nullptr;  // [rows, f] dtype
  const void* x = nullptr;   // [rows, 2*f] dtype, forward input (saved)
  void* dx = nullptr;        // [rows, 2*f] dtype; must not overlap dy or x
  int64_t rows = 0;
  int64_t f = 0;
  Dtype dtype = Dtype::f32;
};

void swiglu_fwd_check(const SwigluFwdArgs& a);
void swiglu_bwd_check(const SwigluBwdArgs& a);

void swiglu_fwd_cpu(const SwigluFwdArgs& a);
void swiglu_bwd_cpu(const SwigluBwdArgs& a);

void swiglu_fwd_cuda(const SwigluFwdArgs& a, cudaStream_t stream);
void swiglu_bwd_cuda(const SwigluBwdArgs& a, cudaStream_t stream);

}  // namespace paralab::kernels
