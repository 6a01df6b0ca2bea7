// paralab — per-rank model dimensions and parameter inventory.
#include "ir/model_shape.hpp"

namespace paralab {

std::string_view to_string(ParamRole r) {
  static constexpr std::string_view names[] = {"ln1_w", "ln1_b", "qkv_w", "qkv_b", "proj_w", "proj_b",
                                               "ln2_w", "ln2_b", "fc1_w", "fc1_b", "fc2_w", "fc2_b",
                                               "word_emb", "pos_emb", "lnf_w", "lnf_b", "out_w"};
  return names[static_cast<size_t>(r)];
}

ModelShape ModelShape::from(const Scenario& s) {
  ModelShape m;
  const ModelConfig& c = s.model;
  m.layers = c.num_layers;
  m.hidden = c.hidden_size;
  m.heads = c.num_attention_heads;
  m.groups = c.num_query_groups;
  m.head_dim = c.kv_channels;
  m.ffn = c.ffn_hidden_size;
  m.vocab = c.padded_vocab(s.parallel.tensor);
  m.seq = c.seq_length;
  m.micro_batch = s.training.micro_batch_size;
  m.activation = c.activation;
  m.norm = c.normalization;
  m.positions = c.position_embedding_type;
  m.bias = c.add_bias_linear;
  m.tied = !c.untie_embeddings;
  m.hidden_dropout = c.hidden_dropout;
  m.attention_dropout = c.attention_dropout;
  m.max_positions = c.max_position_embeddings;
  m.tp = s.parallel.tensor;
  m.cp = s.parallel.context;
  m.dp = s.parallel.data;
  m.pp = s.parallel.pipeline;
  m.sp = s.parallel.sequence_parallel && s.parallel.tensor > 1;
  m.act = activation_dtype(s.training.precision);
  m.math = gemm_math(s.training.precision);
  return m;
}

// Megatron's transformer layer (Shoeybi et al. 2019, Fig. 3): QKV and FC1 are column-parallel
// (output split over TP, bias split), the output projection and FC2 row-parallel (input split,
// bias replicated and added after the reduction); norms are replicated.
std::vector<ParamSpec> ModelShape::layer_params() const {
  std::vector<ParamSpec> p;
  p.push_back({ParamRole::ln1_w, 1, hidden, false});
  if (norm == Normalization::layernorm) p.push_back({ParamRole::ln1_b, 1, hidden, false});
  p.push_back({ParamRole::qkv_w, hidden, qkv_cols(), true});
  if (bias) p.push_back({ParamRole::qkv_b, 1, qkv_cols(), true});
  p.push_back({ParamRole::proj_w, attn_cols(), hidden, true});
  if (bias) p.push_back({ParamRole::proj_b, 1, hidden, false});
  p.push_back({ParamRole::ln2_w, 1, hidden, false});
  if (norm == Normalization::layernorm) p.push_back({ParamRole::ln2_b, 1, hidden, false});
  p.push_back({ParamRole::fc1_w, hidden, fc1_cols(), true});
  if (bias) p.push_back({ParamRole::fc1_b, 1, fc1_cols(), true});
  p.push_back({ParamRole::fc2_w, ffn_local(), hidden, true});
  if (bias) p.push_back({ParamRole::fc2_b, 1, hidden, false});
  return p;
}

// Vocabulary-parallel word embedding (rows split over TP) and, for learned positions, a
// replicated position table.
std::vector<ParamSpec> ModelShape::embedding_params() const {
  std::vector<ParamSpec> p;
  p.push_back({ParamRole::word_emb, vocab_local(), hidden, true});
  if (positions == PositionEmbedding::learned_absolute) p.push_back({ParamRole::pos_emb, max_positions, hidden, false});
  return p;
}

std::vector<ParamSpec> ModelShape::head_params(bool owns_output_layer) const {
  std::vector<ParamSpec> p;
  p.push_back({ParamRole::lnf_w, 1, hidden, false});
  if (norm == Normalization::layernorm) p.push_back({ParamRole::lnf_b, 1, hidden, false});
  if (owns_output_layer) p.push_back({ParamRole::out_w, vocab_local(), hidden, true});
  return p;
}

int64_t ModelShape::total_params() const {
  auto unique = [&](const std::vector<ParamSpec>& ps) {
    int64_t n = 0;
    for (const auto& x : ps) n += x.tp_split ? x.elements() * tp : x.elements();
    return n;
  };
  return layers * unique(layer_params()) + unique(embedding_params()) + unique(head_params(!tied));
}

}  // namespace paralab
