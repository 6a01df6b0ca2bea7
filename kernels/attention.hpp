// kernels/attention.hpp — multi-head (and grouped-query) scaled dot-product attention:
// CPU reference forward/backward and fused flash-style CUDA kernels.
//
// Sources: Vaswani et al. 2017, "Attention Is All You Need", Eq. 1; GQA: Ainslie et al.
// 2023, "GQA: Training Generalized Multi-Query Transformer Models" (q head h reads kv head
// h / (heads / kv_heads)); online softmax and the saved log-sum-exp: Dao et al. 2022,
// "FlashAttention" (NeurIPS), Algorithms 1 (forward) and 4 (backward), and Dao 2023,
// "FlashAttention-2", Algorithm 2 (backward with D_i = rowsum(dO_i * O_i)).
// For batch n, q head h, query i (kv head g = h / (heads / kv_heads)):
//   s_ij  = scale * q_i . k_j          for j <= i if causal, else all j
//   lse_i = log sum_j exp(s_ij)        (natural log, fp32, saved for backward)
//   o_i   = sum_j exp(s_ij - lse_i) v_j
// Backward, with P_ij = exp(s_ij - lse_i) and D_i = dO_i . O_i:
//   dV_j = sum_{h in group} sum_i P_ij dO_i
//   dS_ij = P_ij (dO_i . v_j - D_i)
//   dQ_i = scale sum_j dS_ij k_j;   dK_j = scale sum_{h in group} sum_i dS_ij q_i
// Shapes (row-major, `dtype`): q, out, dout, dq [batch, heads, seq, head_dim];
// k, v, dk, dv [batch, kv_heads, seq, head_dim]; lse fp32 [batch, heads, seq].
// The unfused path (batched GEMM + scaled_masked_softmax + GEMM) is composed by the
// executor from softmax.hpp; these kernels are the fused ("flash") path.
#pragma once

#include <cstdint>

#include "kernels/common.hpp"
#include "kernels/dtype.hpp"

namespace paralab::kernels {

struct AttentionFwdArgs {
  const void* q = nullptr;  // [batch, heads, seq, head_dim] dtype
  const void* k = nullptr;  // [batch, kv_heads, seq, head_dim] dtype
  const void* v = nullptr;  // [batch, kv_heads, seq, head_dim] dtype
  void* out = nullptr;      // [batch, heads, seq, head_dim] dtype
  float* lse = nullptr;     // [batch, heads, seq] fp32 out (needed by backward)
  int64_t batch = 0;
  int64_t heads = 0;        // query heads (per TP rank)
  int64_t kv_heads = 0;     // key/value heads; divides heads (== heads: plain MHA)
  int64_t seq = 0;
  int64_t head_dim = 0;     // CUDA kernels: <= 256
  float scale = 0.f;        // 0 means 1/sqrt(head_dim)
  bool causal = true;
  Dtype dtype = Dtype::f32;
};

struct AttentionBwdArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* out = nullptr;   // forward output
  const void* dout = nullptr;  // [batch, heads, seq, head_dim] dtype
  const float* lse = nullptr;  // [batch, heads, seq] from forward
  void* dq = nullptr;          // [batch, heads, seq, head_dim] dtype
  void* dk = nullptr;          // [batch, kv_heads, seq, head_dim] dtype
  void* dv = nullptr;          // [batch, kv_heads, seq, head_dim] dtype
  int64_t batch = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t seq = 0;
  int64_t head_dim = 0;
  float scale = 0.f;
  bool causal = true;
  Dtype dtype = Dtype::f32;
};

void attention_fwd_check(const AttentionFwdArgs& a);
void attention_bwd_check(const AttentionBwdArgs& a);

// The scale actually used (resolves 0 to 1/sqrt(head_dim)).
float attention_scale(float scale, int64_t head_dim);

// CPU reference (fp32 accumulation, exact softmax per row; O(seq^2 * head_dim) per head).
void attention_fwd_cpu(const AttentionFwdArgs& a);
void attention_bwd_cpu(const AttentionBwdArgs& a);

// Fused CUDA kernels: forward tiles queries and streams key/value tiles through shared
// memory with an online softmax; backward runs a dQ pass and a dK/dV pass (no atomics,
// deterministic). Backward allocates a [batch, heads, seq] fp32 scratch (stream-ordered).
void flash_attention_fwd_cuda(const AttentionFwdArgs& a, cudaStream_t stream);
void flash_attention_bwd_cuda(const AttentionBwdArgs& a, cudaStream_t stream);

}  // namespace paralab::kernels
