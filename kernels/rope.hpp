// kernels/rope.hpp — rotary position embedding (RoPE) forward and backward.
//
// Source: Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding"
// (arXiv:2104.09864), Eq. 34, in the "rotate-half" layout used by GPT-NeoX, Llama and
// Megatron-LM (apply_rotary_pos_emb with rotary_interleaved = false): dimension i of the
// first half pairs with dimension i + D/2, D = rotary_dim.
//   theta_i = base^(-2i / D),  i in [0, D/2);   angle = pos * theta_i
//   y[i]       = x[i] cos(angle) - x[i + D/2] sin(angle)
//   y[i + D/2] = x[i + D/2] cos(angle) + x[i] sin(angle)
//   y[j] = x[j] for j in [D, head_dim)          (partial rotary, GPT-NeoX's rotary_pct)
// Backward is the inverse (transposed) rotation, i.e. the same with angle -> -angle.
// pos of row r = r / batch + position_offset: rows are Megatron's [s, b] order flattened
// (r = s_idx * batch + b_idx). Angles, cos and sin are computed in double on both backends
// (fp32 pos * theta loses ~3 digits at pos ~ 10^4), then applied in fp32.
// Shapes: x, y [rows, heads, head_dim] in `dtype`.
#pragma once

#include <cstdint>

#include "kernels/common.hpp"
#include "kernels/dtype.hpp"

namespace paralab::kernels {

struct RopeArgs {
  const void* x = nullptr;  // [rows, heads, head_dim] dtype (forward: q or k; backward: dy)
  void* y = nullptr;        // same shape (forward: rotated; backward: dx); may alias x
  int64_t rows = 0;         // s * b
  int64_t heads = 0;        // heads of this tensor (q heads or kv groups, per TP rank)
  int64_t head_dim = 0;
  int64_t rotary_dim = 0;   // even, <= head_dim; 0 means head_dim
  int64_t batch = 1;        // b: consecutive rows sharing a position
  int64_t position_offset = 0;  // position of row 0 (e.g. this context-parallel chunk's start)
  double base = 10000.0;        // theta base (> 0)
  Dtype dtype = Dtype::f32;
};

void rope_check(const RopeArgs& a, const char* kernel);

void rope_fwd_cpu(const RopeArgs& a);
void rope_bwd_cpu(const RopeArgs& a);

void rope_fwd_cuda(const RopeArgs& a, cudaStream_t stream);
void rope_bwd_cuda(const RopeArgs& a, cudaStream_t stream);

}  // namespace paralab::kernels
