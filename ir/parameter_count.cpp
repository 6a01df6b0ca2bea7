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

// An MLP of `ffn` hidden units: FC1 (x2 with SwiGLU's gate), FC2, their biases.
int64_t mlp(const ModelConfig& m, int64_t ffn) {
  const int64_t fc1 = m.activation == Activation::swiglu ? 2 * ffn : ffn;
  int64_t n = m.hidden_size * fc1 + ffn * m.hidden_size;
  if (m.add_bias_linear) n += fc1 + m.hidden_size;
  return n;
}

int64_t norm(const ModelConfig& m, int64_t width) {
  return m.normalization == Normalization::layernorm ? 2 * width : width;
}

int64_t attention(const ModelConfig& m) {
  const int64_t h = m.hidden_size, heads = m.num_attention_heads;
  if (!m.mla.multi_latent_attention) {
    const int64_t qkv = m.q_hidden() + 2 * m.kv_hidden();
    int64_t n = h * qkv + m.q_hidden() * h;
    if (m.add_bias_linear) n += qkv + h;
    return n;
  }
  const MLAConfig& a = m.mla;
  const int64_t q_head = a.qk_head_dim + a.qk_pos_emb_head_dim;
  int64_t n = 0;
  if (a.q_lora_rank > 0) n += h * a.q_lora_rank + norm(m, a.q_lora_rank) + a.q_lora_rank * heads * q_head;
  else n += h * heads * q_head;
  n += h * (a.kv_lora_rank + a.qk_pos_emb_head_dim) + norm(m, a.kv_lora_rank);  // latent and shared RoPE key
  n += a.kv_lora_rank * heads * (a.qk_head_dim + a.v_head_dim);                   // keys and values up
  n += heads * a.v_head_dim * h;                                                  // output projection
  if (m.add_bias_linear) n += h;
  return n;
}

LayerCount layer(const ModelConfig& m, bool moe) {
  const int64_t common = norm(m, m.hidden_size) * 2 + attention(m);
  if (!moe) {
    const int64_t n = common + mlp(m, m.ffn_hidden_size);
    return {n, n, 0};
  }
  const MoEConfig& e = m.moe;
  const int64_t one_expert = mlp(m, e.moe_ffn_hidden_size);
  const int64_t shared = e.moe_shared_expert_intermediate_size > 0 ? mlp(m, e.moe_shared_expert_intermediate_size) : 0;
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
  c.total = c.active = c.embedding + norm(m, m.hidden_size);  // plus the final norm
  for (int64_t l = 0; l < m.num_layers; ++l) {
    const LayerCount x = layer(m, m.moe.is_moe_layer(l));
    c.total += x.total;
    c.active += x.active;
    c.experts += x.experts;
  }
  // MTP modules use an MoE layer when the model's last layer is one (DeepSeek-V3).
  if (m.moe.mtp_num_layers > 0) {
    const LayerCount x = layer(m, m.moe.is_moe_layer(m.num_layers - 1));
    c.mtp = m.moe.mtp_num_layers * (2 * norm(m, m.hidden_size) + 2 * m.hidden_size * m.hidden_size + x.total);
  }
  return c;
}

}  // namespace paralab
