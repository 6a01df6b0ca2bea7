// paralab — a model's dimensions as one rank sees them under a layout: local heads, tokens
// per micro-batch, the parameters of each layer and which of them tensor parallelism splits.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ir/scenario.hpp"

namespace paralab {

// Which parameter of a layer, the embedding or the head.
enum class ParamRole : uint8_t {
  ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b,
  word_emb, pos_emb, lnf_w, lnf_b, out_w, kCount
};
constexpr int kParamRoles = static_cast<int>(ParamRole::kCount);
std::string_view to_string(ParamRole r);

// One parameter tensor of a layer (or of the embedding / head), as stored on one TP rank.
struct ParamSpec {
  ParamRole role;
  int64_t rows = 0, cols = 0;
  bool tp_split = true;  // false: replicated on every tensor-parallel rank (norms, row-parallel biases)
  [[nodiscard]] int64_t elements() const { return rows * cols; }
};

struct ModelShape {
  // Global model
  int64_t layers = 0, hidden = 0, heads = 0, groups = 0, head_dim = 0, ffn = 0;
  int64_t vocab = 0;  // padded (Megatron) for the tensor-parallel degree
  int64_t seq = 0, micro_batch = 0;
  Activation activation = Activation::gelu;
  Normalization norm = Normalization::layernorm;
  PositionEmbedding positions = PositionEmbedding::learned_absolute;
  bool bias = true, tied = true;
  double hidden_dropout = 0, attention_dropout = 0;
  int64_t max_positions = 0;
  // Layout
  int64_t tp = 1, cp = 1, dp = 1, pp = 1;
  bool sp = false;
  // Precision
  DType act = DType::bf16;     // activations, weights and gradients as stored
  MathMode math = MathMode::bf16;  // the linear layers' GEMMs

  // The attention core's arithmetic (QK^T, PV, fused attention). FP8 training quantizes the
  // linear layers only and keeps attention in bf16, as Transformer Engine's FP8 recipes do
  // unless FP8 attention is asked for (its `fp8_dpa`), and as exec/cuda runs it: the IR says
  // what runs, so the simulator costs it at the bf16 peak.
  [[nodiscard]] MathMode attention_math() const { return is_quantized(math) ? MathMode::bf16 : math; }

  static ModelShape from(const Scenario& s);

  // Tokens of one micro-batch on one rank: the CP chunk of the sequence times the batch.
  [[nodiscard]] int64_t seq_local() const { return seq / cp; }
  [[nodiscard]] int64_t tokens() const { return seq_local() * micro_batch; }
  // Tokens in sequence-parallel regions (norms, dropout, residual): split over TP with SP.
  [[nodiscard]] int64_t tokens_sp() const { return sp ? tokens() / tp : tokens(); }
  [[nodiscard]] int64_t heads_local() const { return heads / tp; }
  [[nodiscard]] int64_t groups_local() const { return groups / tp; }
  [[nodiscard]] int64_t qkv_cols() const { return (heads_local() + 2 * groups_local()) * head_dim; }
  [[nodiscard]] int64_t attn_cols() const { return heads_local() * head_dim; }  // context width
  [[nodiscard]] int64_t ffn_local() const { return ffn / tp; }
  [[nodiscard]] int64_t fc1_cols() const { return activation == Activation::swiglu ? 2 * ffn_local() : ffn_local(); }
  [[nodiscard]] int64_t vocab_local() const { return vocab / tp; }
  [[nodiscard]] int64_t norm_params() const { return norm == Normalization::layernorm ? 2 : 1; }

  // Parameters of one transformer layer on one TP rank, in forward order.
  [[nodiscard]] std::vector<ParamSpec> layer_params() const;
  [[nodiscard]] std::vector<ParamSpec> embedding_params() const;  // first stage
  // Last stage: final norm, plus the output layer unless it is the first stage's tied table.
  [[nodiscard]] std::vector<ParamSpec> head_params(bool owns_output_layer) const;

  // Unique parameters of the whole model (every TP shard once, tied tables once).
  [[nodiscard]] int64_t total_params() const;
};

}  // namespace paralab
