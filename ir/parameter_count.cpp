// paralab — parameters from the [model] keys (ir/parameter_count.hpp). The dense layer is
// ir/model_shape.cpp's (Megatron's GPT layer); an MoE layer replaces the MLP by a router
// (hidden x experts, Megatron's TopKRouter weight), num_experts expert MLPs of
// moe_ffn_hidden_size and the shared experts' MLP; MLA replaces QKV by DeepSeek-V2's low-rank
// projections (DeepSeek-AI 2024, "DeepSeek-V2", Sec. 2.1.2 and Appendix; Megatron's
// MLASelfAttention). An MTP module (DeepSeek-V3 report Sec. 2.2) is two norms, a 2h x h
// projection and one transformer layer, sharing the embedding and the output head.
#include "ir/parameter_count.hpp"

namespace paralab {

namespace {

struct LayerCount {
  int64_t total = 0, active = 0, experts = 0;
};

// `linear`: count only the weights of matrix multiplies (no norms, no biases), for FLOPs.
// An MLP of `ffn` hidden units: FC1 (x2 with SwiGLU's gate), FC2, their biases.
int64_t mlp(const ModelConfig& m, int64_t ffn, bool linear) {
  const int64_t fc1 = m.activation == Activation::swiglu ? 2 * ffn : ffn;
  int64_t n = m.hidden_size * fc1 + ffn * m.hidden_size;
  if (m.add_bias_linear && !linear) n += fc1 + m.hidden_size;
  return n;
}

int64_t norm(const ModelConfig& m, int64_t width, bool linear) {
  if (linear) return 0;
  return m.normalization == Normalization::layernorm ? 2 * width : width;
}

int64_t attention(const ModelConfig& m, bool linear) {
  const int64_t h = m.hidden_size, heads = m.num_attention_heads;
  if (!m.mla.multi_latent_attention) {
    const int64_t qkv = m.q_hidden() + 2 * m.kv_hidden();
    int64_t n = h * qkv + m.q_hidden() * h;
    if (m.add_bias_linear && !linear) n += qkv + h;
    return n;
  }
  const MLAConfig& a = m.mla;
  const int64_t q_head = a.qk_head_dim + a.qk_pos_emb_head_dim;
  int64_t n = 0;
  if (a.q_lora_rank > 0) n += h * a.q_lora_rank + norm(m, a.q_lora_rank, linear) + a.q_lora_rank * heads * q_head;
  else n += h * heads * q_head;
  n += h * (a.kv_lora_rank + a.qk_pos_emb_head_dim) + norm(m, a.kv_lora_rank, linear);  // latent, shared RoPE key
  n += a.kv_lora_rank * heads * (a.qk_head_dim + a.v_head_dim);                   // keys and values up
  n += heads * a.v_head_dim * h;                                                  // output projection
  if (m.add_bias_linear && !linear) n += h;
  return n;
}

LayerCount layer(const ModelConfig& m, bool moe, bool linear = false) {
  const int64_t common = norm(m, m.hidden_size, linear) * 2 + attention(m, linear);
  if (!moe) {
    const int64_t n = common + mlp(m, m.ffn_hidden_size, linear);
    return {n, n, 0};
  }
  const MoEConfig& e = m.moe;
  const int64_t one_expert = mlp(m, e.moe_ffn_hidden_size, linear);
  const int64_t shared =
      e.moe_shared_expert_intermediate_size > 0 ? mlp(m, e.moe_shared_expert_intermediate_size, linear) : 0;
  const int64_t router = m.hidden_size * e.num_experts;
  const int64_t dense = common + router + shared;
  return {dense + e.num_experts * one_expert, dense + e.moe_router_topk * one_expert, e.num_experts * one_expert};
}

}  // namespace

ParameterCount count_parameters(const ModelConfig& m, int64_t vocab) {
  ParameterCount c;
  c.embedding = vocab * m.hidden_size * (m.untie_embeddings ? 2 : 1);
  if (m.position_embedding_type == PositionEmbedding::learned_absolute)
    c.embedding += m.max_position_embeddings * m.hidden_size;
  c.total = c.active = c.embedding + norm(m, m.hidden_size, false);  // plus the final norm
  for (int64_t l = 0; l < m.num_layers; ++l) {
    const LayerCount x = layer(m, m.moe.is_moe_layer(l));
    c.total += x.total;
    c.active += x.active;
    c.experts += x.experts;
  }
  // MTP modules use an MoE layer when the model's last layer is one (DeepSeek-V3).
  if (m.moe.mtp_num_layers > 0) {
    const LayerCount x = layer(m, m.moe.is_moe_layer(m.num_layers - 1));
    c.mtp = m.moe.mtp_num_layers * (2 * norm(m, m.hidden_size, false) + 2 * m.hidden_size * m.hidden_size + x.total);
  }
  return c;
}

// Korthikanti et al. 2022, Eq. 7 per token, generalized: forward and backward (x3) of 2 FLOPs
// per weight of every matrix multiply a token passes through (the routed experts it reaches,
// the output layer; not the embedding lookup) and of the attention core over the full
// sequence, 2 s heads (qk + v) per token (MLA: qk_head_dim + qk_pos_emb_head_dim and
// v_head_dim; otherwise kv_channels each). Multi-token prediction is not counted.
double model_flops_per_token(const ModelConfig& m, int64_t vocab) {
  double weights = static_cast<double>(vocab) * static_cast<double>(m.hidden_size);  // output layer
  for (int64_t l = 0; l < m.num_layers; ++l) weights += static_cast<double>(layer(m, m.moe.is_moe_layer(l), true).active);
  const double dqk = m.mla.multi_latent_attention ? static_cast<double>(m.mla.qk_head_dim + m.mla.qk_pos_emb_head_dim)
                                                  : static_cast<double>(m.kv_channels);
  const double dv = m.mla.multi_latent_attention ? static_cast<double>(m.mla.v_head_dim) : static_cast<double>(m.kv_channels);
  const double attention = 2.0 * static_cast<double>(m.seq_length) * static_cast<double>(m.num_attention_heads) * (dqk + dv);
  return 3.0 * (2.0 * weights + attention * static_cast<double>(m.num_layers));
}

}  // namespace paralab
