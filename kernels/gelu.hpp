// kernels/gelu.hpp — bias + GELU (tanh approximation) forward/backward.
//
// Source: Hendrycks & Gimpel 2016, "Gaussian Error Linear Units" (arXiv:1606.08415), Sec. 2,
// tanh approximation; fused with the preceding bias as Megatron-LM's bias_gelu
// (megatron/core/fusions/fused_bias_gelu.py):
//   u = x + bias[c]                     (bias optional)
//   y = 0.5 u (1 + tanh(k0 (u + k1 u^3))),   k0 = sqrt(2/pi), k1 = 0.044715
//   dy/du = 0.5 (1 + t) + 0.5 u (1 - t^2) k0 (1 + 3 k1 u^2),   t = tanh(k0 (u + k1 u^3))
// Backward: dx = dy * dy/du; dbias[c] = sum_r dx[r,c] (fp32, from the unrounded dx).
// Shapes: x, y, dy, dx [rows, cols] in `dtype`; bias [cols] in `dtype`; dbias [cols] fp32.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common.hpp"
#include "kernels/dtype.hpp"

namespace paralab::kernels {

constexpr float kGeluK0 = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluK1 = 0.044715f;

// Shared by the CPU twin and the CUDA kernel (fp32). Evaluated through the identity
// 0.5 (1 + tanh(z)) = sigmoid(2z) (no cancellation, one expf instead of tanhf, which is
// ~4x slower on the CPU):  gelu(u) = u * s,  s = 1 / (1 + exp(-2z)),  z = k0 (u + k1 u^3);
// dgelu/du = s + 2 u s (1 - s) k0 (1 + 3 k1 u^2)   (the tanh form above, with 1 - t^2 =
// 4 s (1 - s)). exp overflows to +Inf for u << 0: s = 0 exactly, gelu = -0, grad = 0.
PARALAB_HD float gelu_tanh(float u) {
  const float z = kGeluK0 * (u + kGeluK1 * u * u * u);
  return u / (1.f + expf(-2.f * z));
}
PARALAB_HD float gelu_tanh_grad(float u) {
  const float z = kGeluK0 * (u + kGeluK1 * u * u * u);
  const float s = 1.f / (1.f + expf(-2.f * z));
  return s + 2.f * u * s * (1.f - s) * kGeluK0 * (1.f + 3.f * kGeluK1 * u * u);
}

struct GeluFwdArgs {
  const void* x = nullptr;     // [rows, cols] dtype, pre-activation (GEMM output)
  const void* bias = nullptr;  // [cols] dtype; null = no bias
  void* y = nullptr;           // [rows, cols] dtype; may alias x
  int64_t rows = 0;
  int64_t cols = 0;            // ffn hidden size (per TP rank)
  Dtype dtype = Dtype::f32;
};

struct GeluBwdArgs {
  const void* dy = nullptr;    // [rows, cols] dtype
  const void* x = nullptr;     // [rows, cols] dtype, forward input (saved)
  const void* bias = nullptr;  // [cols] dtype; null = forward had no bias
  void* dx = nullptr;          // [rows, cols] dtype; may alias dy
  float* dbias = nullptr;      // [cols] fp32 = sum_r dx; null = not computed
  bool accumulate = false;     // dbias += (true) or = (false)
  int64_t rows = 0;
  int64_t cols = 0;
  Dtype dtype = Dtype::f32;
};

void gelu_fwd_check(const GeluFwdArgs& a);
void gelu_bwd_check(const GeluBwdArgs& a);

void gelu_fwd_cpu(const GeluFwdArgs& a);
void gelu_bwd_cpu(const GeluBwdArgs& a);

void gelu_fwd_cuda(const GeluFwdArgs& a, cudaStream_t stream);
void gelu_bwd_cuda(const GeluBwdArgs& a, cudaStream_t stream);

}  // namespace paralab::kernels
