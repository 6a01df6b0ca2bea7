// kernels/softmax.hpp — scaled, masked softmax over attention scores (the unfused attention
// path: batched GEMM -> this -> dropout -> batched GEMM, composed by the executor).
//
// Semantics follow Megatron-LM's fused kernels (megatron/core/fusions/fused_softmax.py:
// scaled_upper_triang_masked_softmax for `causal`, scaled_masked_softmax for `mask`), with
// one deliberate difference: Megatron fills masked scores with -10000, so a fully masked row
// becomes uniform; here masked scores are -Inf and a fully masked row is all zeros (no NaN).
// For a row (n, i) of scores x[n, i, 0..sk), n = batch*heads index, i = query index:
//   key j is masked iff (causal and j > i + (sk - sq)) or (mask and mask[n/heads, i, j] != 0)
//   y[n,i,j] = exp(scale x_j - m) / sum_{unmasked j'} exp(scale x_j' - m)  for unmasked j,
//              m = max over unmasked j of scale x_j;   y = 0 for masked j.
// (Softmax: Bridle 1990; scaled dot-product attention: Vaswani et al. 2017, Eq. 1.)
// Backward (softmax Jacobian, y already zero where masked):
//   dx[n,i,j] = scale * y_j * (dy_j - sum_j' dy_j' y_j')
// Shapes: x, y, dy, dx [batches, sq, sk] in `dtype`; mask [batches/heads, sq, sk] uint8.
#pragma once

#include <cstdint>

#include "kernels/common.hpp"
#include "kernels/dtype.hpp"

namespace paralab::kernels {

struct SoftmaxFwdArgs {
  const void* x = nullptr;        // [batches, sq, sk] dtype, raw scores (Q K^T)
  void* y = nullptr;              // [batches, sq, sk] dtype, probabilities; may alias x
  const uint8_t* mask = nullptr;  // optional [batches/heads, sq, sk], 1 = masked out
  int64_t batches = 0;            // b * heads (per TP rank)
  int64_t sq = 0;                 // queries
  int64_t sk = 0;                 // keys
  int64_t heads = 1;              // consecutive batches sharing one mask plane; divides batches
  float scale = 1.f;              // e.g. 1/sqrt(head_dim)
  bool causal = false;            // key j > i + (sk - sq) masked (upper triangle for sq == sk)
  Dtype dtype = Dtype::f32;
};

struct SoftmaxBwdArgs {
  const void* dy = nullptr;  // [batches, sq, sk] dtype
  const void* y = nullptr;   // [batches, sq, sk] dtype, forward output
  void* dx = nullptr;        // [batches, sq, sk] dtype; may alias dy
  int64_t batches = 0;
  int64_t sq = 0;
  int64_t sk = 0;
  float scale = 1.f;         // same scale as forward
  Dtype dtype = Dtype::f32;
};

void softmax_fwd_check(const SoftmaxFwdArgs& a);
void softmax_bwd_check(const SoftmaxBwdArgs& a);

void scaled_masked_softmax_fwd_cpu(const SoftmaxFwdArgs& a);
void scaled_masked_softmax_bwd_cpu(const SoftmaxBwdArgs& a);

void scaled_masked_softmax_fwd_cuda(const SoftmaxFwdArgs& a, cudaStream_t stream);
void scaled_masked_softmax_bwd_cuda(const SoftmaxBwdArgs& a, cudaStream_t stream);

}  // namespace paralab::kernels
