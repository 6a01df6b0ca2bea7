// paralab — a model's parameters counted from its [model] keys, as the published totals count
// them (unpadded vocabulary): total, active per token (the routed experts a token reaches,
// top-k of them, plus everything dense), and the multi-token-prediction modules apart
// (DeepSeek-V3: 671B total, 37B active, MTP 14B beside them).
#pragma once

#include <cstdint>

#include "ir/scenario.hpp"

namespace paralab {

struct ParameterCount {
  int64_t total = 0;
  int64_t active = 0;
  int64_t mtp = 0;          // multi-token prediction modules (not in total or active)
  int64_t embedding = 0;    // input embedding, plus the output layer when untied (in both)
  int64_t experts = 0;      // routed expert weights (in total; top-k/num_experts of them active)
};

// `vocab` is the vocabulary the embedding holds: model.vocab_size for published totals,
// padded_vocab(tp) for what a layout stores.
ParameterCount count_parameters(const ModelConfig& m, int64_t vocab);

// Model FLOPs of one token's forward and backward pass (Korthikanti et al. 2022, Eq. 7,
// generalized to GQA, SwiGLU, experts and MLA; no recomputation): what MFU divides by.
double model_flops_per_token(const ModelConfig& m, int64_t vocab);

}  // namespace paralab
