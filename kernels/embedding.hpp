// kernels/embedding.hpp — vocab-parallel embedding lookup forward and backward.
//
// Semantics of Megatron-LM's VocabParallelEmbedding (megatron/core/tensor_parallel/
// layers.py; Shoeybi et al. 2019, "Megatron-LM", Sec. 3): each tensor-parallel rank holds
// rows [vocab_start, vocab_end) of the table; ids outside that range produce zero rows, and
// the all-reduce over the TP group (done by the executor) sums the partial results.
//   out[r, :] = table[ids[r] - vocab_start, :]   if vocab_start <= ids[r] < vocab_end
//             = 0                                otherwise
// Backward (scatter-add): dtable[ids[r] - vocab_start, :] += dout[r, :] for in-range ids.
// The CPU twin adds rows in increasing r (deterministic); the CUDA kernel uses fp32
// atomicAdd, so the summation order of repeated ids varies (results differ in the last
// bits; tests compare with a tolerance).
// Shapes: ids int32 [rows]; table [vocab_end - vocab_start, hidden] in `dtype`;
// out, dout [rows, hidden] in `dtype`; dtable [vocab_end - vocab_start, hidden] fp32.
#pragma once

#include <cstdint>

#include "kernels/common.hpp"
#include "kernels/dtype.hpp"

namespace paralab::kernels {

struct EmbeddingFwdArgs {
  const int32_t* ids = nullptr;  // [rows] token ids (global vocabulary)
  const void* table = nullptr;   // [vocab_end - vocab_start, hidden] dtype
  void* out = nullptr;           // [rows, hidden] dtype
  int64_t rows = 0;              // tokens (s*b)
  int64_t hidden = 0;
  int64_t vocab_start = 0;       // this rank's first id
  int64_t vocab_end = 0;         // one past its last id (> vocab_start)
  Dtype dtype = Dtype::f32;
};

struct EmbeddingBwdArgs {
  const int32_t* ids = nullptr;  // [rows]
  const void* dout = nullptr;    // [rows, hidden] dtype
  float* dtable = nullptr;       // [vocab_end - vocab_start, hidden] fp32 (main grad)
  bool accumulate = false;       // true: add into dtable; false: zero it first
  int64_t rows = 0;
  int64_t hidden = 0;
  int64_t vocab_start = 0;
  int64_t vocab_end = 0;
  Dtype dtype = Dtype::f32;      // of dout
};

void embedding_fwd_check(const EmbeddingFwdArgs& a);
void embedding_bwd_check(const EmbeddingBwdArgs& a);

void embedding_fwd_cpu(const EmbeddingFwdArgs& a);
void embedding_bwd_cpu(const EmbeddingBwdArgs& a);

void embedding_fwd_cuda(const EmbeddingFwdArgs& a, cudaStream_t stream);
void embedding_bwd_cuda(const EmbeddingBwdArgs& a, cudaStream_t stream);

}  // namespace paralab::kernels
