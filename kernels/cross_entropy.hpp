// kernels/cross_entropy.hpp — vocab-parallel softmax cross-entropy, in the stages the
// executor interleaves with all-reduces over the tensor-parallel group.
//
// Semantics of Megatron-LM's vocab_parallel_cross_entropy (megatron/core/tensor_parallel/
// cross_entropy.py; Shoeybi et al. 2019, "Megatron-LM"). Rank t holds logits[r, v] for global
// vocabulary ids [vocab_start, vocab_start + vocab) (vocab = local width):
//   (a) ce_local_max:    lmax[r] = max_v logits[r, v]               -> all-reduce MAX -> m[r]
//   (b) ce_local_sumexp: sum[r] = sum_v exp(logits[r, v] - m[r]);
//                        tgt[r] = logits[r, targets[r] - vocab_start] if the target id is
//                                 local, else 0                      -> all-reduce SUM (both)
//   (c) ce_loss:         loss[r] = log(sum[r]) + m[r] - tgt[r]       (= -log softmax[target])
//                        mean_loss = (1/rows) sum_r loss[r]
//   bwd: ce_bwd:         dlogits[r, v] = (exp(logits[r,v] - m[r]) / sum[r]
//                                         - [vocab_start + v == targets[r]]) * g[r]
//                        g[r] = dloss_scale * (dloss ? dloss[r] : 1)
// For the mean loss under loss scale S: dloss = null, dloss_scale = S / rows (d mean/d loss_r
// = 1/rows); with a per-token loss mask: dloss[r] = mask[r] / num_tokens. Every target must be
// a valid global id (there is no ignore_index; mask tokens through dloss instead).
// Shapes: logits, dlogits [rows, vocab] in `dtype`; targets int32 [rows]; lmax, m, sum, tgt,
// loss, dloss [rows] fp32; mean_loss a single fp32. On CUDA all pointers are device pointers
// (mean_loss too, so no host synchronization is needed).
#pragma once

#include <cstdint>

#include "kernels/common.hpp"
#include "kernels/dtype.hpp"

namespace paralab::kernels {

struct CeMaxArgs {
  const void* logits = nullptr;  // [rows, vocab] dtype
  float* row_max = nullptr;      // [rows] out: local max
  int64_t rows = 0;
  int64_t vocab = 0;             // local vocabulary width
  Dtype dtype = Dtype::f32;
};

struct CeSumExpArgs {
  const void* logits = nullptr;     // [rows, vocab] dtype
  const int32_t* targets = nullptr; // [rows] global ids
  const float* row_max = nullptr;   // [rows] global max (after the MAX all-reduce)
  float* sum_exp = nullptr;         // [rows] out: local sum of exp(x - max)
  float* target_logit = nullptr;    // [rows] out: target logit if local, else 0
  int64_t rows = 0;
  int64_t vocab = 0;
  int64_t vocab_start = 0;
  Dtype dtype = Dtype::f32;
};

struct CeLossArgs {
  const float* row_max = nullptr;       // [rows] global max
  const float* sum_exp = nullptr;       // [rows] global sum (after the SUM all-reduce)
  const float* target_logit = nullptr;  // [rows] global target logit (after the SUM)
  float* loss = nullptr;                // [rows] out; null = not stored
  float* mean_loss = nullptr;           // [1] out; null = not computed
  int64_t rows = 0;
};

struct CeBwdArgs {
  const void* logits = nullptr;      // [rows, vocab] dtype
  const int32_t* targets = nullptr;  // [rows]
  const float* row_max = nullptr;    // [rows] global max
  const float* sum_exp = nullptr;    // [rows] global sum
  const float* dloss = nullptr;      // [rows] optional per-row upstream grad
  float dloss_scale = 1.f;           // multiplies every row's grad
  void* dlogits = nullptr;           // [rows, vocab] dtype; may alias logits
  int64_t rows = 0;
  int64_t vocab = 0;
  int64_t vocab_start = 0;
  Dtype dtype = Dtype::f32;
};

// Single-partition convenience (vocab_start = 0, no all-reduce): stages a, b, c in a row.
// row_max and sum_exp are required outputs (backward needs them).
struct CrossEntropyArgs {
  const void* logits = nullptr;      // [rows, vocab] dtype
  const int32_t* targets = nullptr;  // [rows]
  float* row_max = nullptr;          // [rows] out
  float* sum_exp = nullptr;          // [rows] out
  float* loss = nullptr;             // [rows] out; null = not stored
  float* mean_loss = nullptr;        // [1] out; null = not computed
  int64_t rows = 0;
  int64_t vocab = 0;
  Dtype dtype = Dtype::f32;
};

void ce_local_max_check(const CeMaxArgs& a);
void ce_local_sumexp_check(const CeSumExpArgs& a);
void ce_loss_check(const CeLossArgs& a);
void ce_bwd_check(const CeBwdArgs& a);
void cross_entropy_fwd_check(const CrossEntropyArgs& a);

void ce_local_max_cpu(const CeMaxArgs& a);
void ce_local_sumexp_cpu(const CeSumExpArgs& a);
void ce_loss_cpu(const CeLossArgs& a);
void ce_bwd_cpu(const CeBwdArgs& a);
void cross_entropy_fwd_cpu(const CrossEntropyArgs& a);  // target_logit not kept

void ce_local_max_cuda(const CeMaxArgs& a, cudaStream_t stream);
void ce_local_sumexp_cuda(const CeSumExpArgs& a, cudaStream_t stream);
void ce_loss_cuda(const CeLossArgs& a, cudaStream_t stream);
void ce_bwd_cuda(const CeBwdArgs& a, cudaStream_t stream);
// Needs a [rows] fp32 device scratch for the target logits; allocated stream-ordered.
void cross_entropy_fwd_cuda(const CrossEntropyArgs& a, cudaStream_t stream);

}  // namespace paralab::kernels
