// paralab — mixture-of-experts, multi-head latent attention and multi-token prediction keys of
// [model], with Megatron-LM's names and defaults (megatron/core/transformer/transformer_config.py,
// megatron/training/arguments.py). Loaded and validated with the rest of the scenario
// (ir/validate_moe.cpp); docs/config.md lists them, docs/moe.md says what paralab does with them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/error.hpp"

namespace paralab {

enum class RouterScore : uint8_t { softmax, sigmoid };
enum class LoadBalancing : uint8_t { aux_loss, seq_aux_loss, none };
enum class TokenDispatcher : uint8_t { allgather, alltoall };
// How tokens spread over the experts (an input: paralab does not run a router to predict it).
enum class RoutingModel : uint8_t { balanced, zipf, hot_expert, measured };

struct MoEConfig {
  int64_t num_experts = 0;                      // 0: a dense model
  int64_t moe_router_topk = 2;
  int64_t moe_ffn_hidden_size = 0;              // per expert; 0: ffn_hidden_size
  int64_t moe_shared_expert_intermediate_size = 0;  // all shared experts together; 0: none
  // Which layers hold experts, in Megatron's spellings: an integer N (every N-th layer, from
  // layer 0) or a pattern such as "([0]*3+[1]*58)" (DeepSeek-V3: three dense layers first).
  std::string moe_layer_freq = "1";
  std::vector<bool> moe_layers;                 // parsed at load: one flag per layer
  RouterScore moe_router_score_function = RouterScore::softmax;
  double moe_router_topk_scaling_factor = 0;    // 0: unset (weights not rescaled)
  int64_t moe_router_num_groups = 0;            // node-limited routing; 0: off
  int64_t moe_router_group_topk = 0;
  LoadBalancing moe_router_load_balancing_type = LoadBalancing::aux_loss;
  bool moe_router_enable_expert_bias = false;   // DeepSeek-V3's auxiliary-loss-free balancing
  double moe_aux_loss_coeff = 0;
  TokenDispatcher moe_token_dispatcher_type = TokenDispatcher::allgather;
  double moe_expert_capacity_factor = 0;        // 0: unset, dropless
  bool moe_grouped_gemm = false;
  int64_t mtp_num_layers = 0;                   // multi-token prediction modules (DeepSeek-V3: 1)

  // Routing imbalance (ir/moe_routing.hpp): balanced; Zipf shares with this exponent; one hot
  // expert with this share of the routed tokens; or measured counts from a CSV file (one row of
  // num_experts counts for every MoE layer, or one row per MoE layer). The seed shuffles which
  // experts are hot.
  RoutingModel moe_routing = RoutingModel::balanced;
  double moe_routing_zipf_exponent = 1.0;
  double moe_routing_hot_expert_share = 0;
  std::string moe_routing_counts_file;
  int64_t moe_routing_seed = 1;
  std::vector<std::vector<double>> measured_counts;  // loaded at the edge from the file

  [[nodiscard]] bool enabled() const { return num_experts > 0; }
  [[nodiscard]] bool is_moe_layer(int64_t layer) const {
    return enabled() && layer >= 0 && layer < static_cast<int64_t>(moe_layers.size()) &&
           moe_layers[static_cast<size_t>(layer)];
  }
};

// Multi-head latent attention (DeepSeek-V2/V3): queries and keys/values through low-rank
// latents; each head's query/key has a non-positional part (qk_head_dim) and a RoPE part
// (qk_pos_emb_head_dim, one key part shared by all heads), its value v_head_dim.
struct MLAConfig {
  bool multi_latent_attention = false;
  int64_t q_lora_rank = 0;       // 0: queries projected directly (DeepSeek-V2-Lite)
  int64_t kv_lora_rank = 512;
  int64_t qk_head_dim = 128;
  int64_t qk_pos_emb_head_dim = 64;
  int64_t v_head_dim = 128;
};

std::string_view to_string(RoutingModel m);

// Megatron's moe_layer_freq for `num_layers` layers: "N" (layer i has experts when i % N == 0)
// or a pattern of terms "[a,b,...]*n" joined by "+", optionally in parentheses, of exactly
// num_layers 0/1 entries. Throws ConfigError at `where`/`key` otherwise.
std::vector<bool> parse_moe_layer_freq(const std::string& text, int64_t num_layers, const SourceLoc& where,
                                       const std::string& key);

}  // namespace paralab
