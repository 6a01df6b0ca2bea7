// paralab — validation of the mixture-of-experts, MLA and expert-parallel keys, refusing what
// Megatron-LM refuses (megatron/training/arguments.py, megatron/core/transformer/
// transformer_config.py: __post_init__) with its reason.
#include "ir/validate_util.hpp"

namespace paralab {

namespace {

void validate_router(const Checker& c, const MoEConfig& e) {
  const std::string n = std::to_string(e.num_experts);
  if (e.moe_router_topk > e.num_experts)
    c.fail("model.moe_router_topk", e.moe_router_topk, "routes each token to more experts than there are (" + n + ")",
           "1 .. num_experts (" + n + ")");
  const bool groups = e.moe_router_num_groups > 0, group_topk = e.moe_router_group_topk > 0;
  if (groups != group_topk)
    c.fail(groups ? "model.moe_router_num_groups" : "model.moe_router_group_topk",
           groups ? e.moe_router_num_groups : e.moe_router_group_topk,
           "node-limited routing needs both moe_router_num_groups and moe_router_group_topk", "set both, or neither");
  if (groups) {
    c.divides("model.moe_router_num_groups", e.moe_router_num_groups, e.num_experts, "num_experts");
    if (e.moe_router_group_topk > e.moe_router_num_groups)
      c.fail("model.moe_router_group_topk", e.moe_router_group_topk,
             "selects more groups than there are (" + std::to_string(e.moe_router_num_groups) + ")",
             "1 .. moe_router_num_groups");
    const int64_t reachable = e.moe_router_group_topk * (e.num_experts / e.moe_router_num_groups);
    if (e.moe_router_topk > reachable)
      c.fail("model.moe_router_topk", e.moe_router_topk,
             "exceeds the experts of the selected groups (group_topk x num_experts / num_groups = " +
                 std::to_string(reachable) + ")",
             "at most " + std::to_string(reachable));
  }
  if (e.moe_router_enable_expert_bias && e.moe_router_score_function != RouterScore::sigmoid)
    c.fail("model.moe_router_enable_expert_bias", "true",
           "Megatron-LM: expert bias for aux-loss-free routing only supports the sigmoid score function",
           "moe_router_score_function = \"sigmoid\", or no expert bias");
  if (e.moe_expert_capacity_factor > 0 && e.moe_token_dispatcher_type != TokenDispatcher::alltoall)
    c.fail("model.moe_expert_capacity_factor", std::to_string(e.moe_expert_capacity_factor),
           "Megatron-LM: the expert capacity factor is only supported with the alltoall token dispatcher",
           "moe_token_dispatcher_type = \"alltoall\", or no capacity factor (dropless)");
}

void validate_routing_model(const Checker& c, const MoEConfig& e) {
  const bool measured = e.moe_routing == RoutingModel::measured, has_file = !e.moe_routing_counts_file.empty();
  if (measured != has_file)
    c.fail(measured ? "model.moe_routing" : "model.moe_routing_counts_file",
           measured ? "measured" : e.moe_routing_counts_file,
           measured ? "measured routing needs moe_routing_counts_file" : "a counts file is read only by measured routing",
           "moe_routing = \"measured\" with moe_routing_counts_file, or neither");
  const double lo = 1.0 / static_cast<double>(e.num_experts), hi = 1.0 / static_cast<double>(e.moe_router_topk);
  const double hot = e.moe_routing_hot_expert_share;
  if (e.moe_routing == RoutingModel::hot_expert && (hot < lo || hot > hi))
    c.fail("model.moe_routing_hot_expert_share", std::to_string(hot),
           "the hot expert's share of the routed tokens lies between the balanced share 1/num_experts and 1/top-k "
           "(top-k picks distinct experts, so an expert sees a token at most once)",
           std::to_string(lo) + " .. " + std::to_string(hi));
}

void validate_expert_parallel(const Checker& c, const Scenario& s) {
  const ParallelConfig& p = s.parallel;
  const int64_t E = s.model.moe.num_experts;
  if (!s.model.moe.enabled()) {
    if (p.expert > 1)
      c.fail("parallel.expert", p.expert, "expert parallelism needs experts (model.num_experts is 0)",
             "1, or set model.num_experts");
    if (p.expert_tensor_size() != p.tensor)
      c.fail("parallel.expert_tensor", p.expert_tensor, "expert tensor parallelism needs experts (model.num_experts is 0)",
             "the tensor size (" + std::to_string(p.tensor) + "), or set model.num_experts");
    return;
  }
  c.divides("parallel.expert", p.expert, E, "model.num_experts");
  const int64_t ranks = p.tensor * p.context * p.data;
  const int64_t folded = p.expert * p.expert_tensor_size();
  if (ranks % folded != 0)
    c.fail("parallel.expert", p.expert,
           "expert x expert_tensor (" + std::to_string(folded) +
               ") does not divide a pipeline stage's ranks, tensor x context x data (" + std::to_string(ranks) + ")",
           "expert x expert_tensor dividing " + std::to_string(ranks) + ": " + divisors_of(ranks));
  if (p.tensor > 1 && !p.sequence_parallel)
    c.fail("parallel.sequence_parallel", "false",
           "Megatron-LM: when using MoE and tensor parallelism, sequence parallelism must be used",
           "sequence_parallel = true, or tensor = 1");
}

}  // namespace

void validate_moe(const Scenario& s) {
  const Checker c{s};
  const ModelConfig& m = s.model;
  validate_expert_parallel(c, s);
  if (m.mla.multi_latent_attention && m.position_embedding_type != PositionEmbedding::rope)
    c.fail("model.position_embedding_type", std::string(to_string(m.position_embedding_type)),
           "multi-head latent attention applies RoPE to its qk_pos_emb_head_dim part", "\"rope\"");
  if (!m.moe.enabled()) {
    if (m.moe.moe_routing != RoutingModel::balanced)
      c.fail("model.moe_routing", std::string(to_string(m.moe.moe_routing)), "a routing model needs experts (model.num_experts is 0)",
             "\"balanced\", or set model.num_experts");
    if (m.moe.mtp_num_layers > 0)
      c.fail("model.mtp_num_layers", m.moe.mtp_num_layers, "is only modeled with experts (DeepSeek-V3's MTP)",
             "0, or set model.num_experts");
    return;
  }
  validate_router(c, m.moe);
  validate_routing_model(c, m.moe);
  bool any = false;
  for (bool b : m.moe.moe_layers) any = any || b;
  if (!any)
    c.fail("model.moe_layer_freq", m.moe.moe_layer_freq, "places experts in no layer",
           "a pattern with at least one 1, or num_experts = 0 for a dense model");
}

}  // namespace paralab
