// paralab inspect of a model whose step ops are not generated yet (experts, MLA: docs/moe.md):
// the layout, the folded expert groups and the parameter counts, from the [model] keys.
#include <algorithm>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/inspect_moe.hpp"
#include "ir/enum_names.hpp"
#include "ir/moe_routing.hpp"
#include "ir/parameter_count.hpp"
#include "ir/summary_json.hpp"

namespace paralab::cli {

namespace {
// 46.70 B, 13.2 M, 5120: a parameter count in the unit that keeps three or four digits.
std::string count(int64_t n) {
  char buf[32];
  if (n >= 1000000000) std::snprintf(buf, sizeof buf, "%.2f B", n / 1e9);
  else if (n >= 1000000) std::snprintf(buf, sizeof buf, "%.2f M", n / 1e6);
  else std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(n));
  return buf;
}

nlohmann::json moe_json(const Scenario& s) {
  const MoEConfig& e = s.model.moe;
  const ParallelConfig& p = s.parallel;
  int64_t moe_layers = 0;
  for (bool b : e.moe_layers) moe_layers += b ? 1 : 0;
  nlohmann::json j;
  j["num_experts"] = e.num_experts;
  j["moe_router_topk"] = e.moe_router_topk;
  j["moe_layers"] = moe_layers;
  j["expert"] = p.expert;
  j["expert_tensor"] = p.expert_tensor_size();
  j["expert_data"] = p.tensor * p.context * p.data / (p.expert * p.expert_tensor_size());
  j["experts_per_rank"] = e.num_experts / p.expert;
  // Routing imbalance per MoE layer, its worst layer: the busiest EP rank over the mean.
  double ep_worst = 0, expert_worst = 0;
  for (int64_t l = 0; l < moe_layers; ++l) {
    const RoutingLoad load = routing_load(expert_shares(e, l), p.expert);
    ep_worst = std::max(ep_worst, load.ep_rank_max_over_mean);
    expert_worst = std::max(expert_worst, load.expert_max_over_mean);
  }
  j["routing"] = {{"model", std::string(to_string(e.moe_routing))},
                  {"ep_rank_max_over_mean", ep_worst},
                  {"expert_max_over_mean", expert_worst}};
  return j;
}
}  // namespace

int inspect_model_only(const Scenario& s, bool json) {
  const ParameterCount c = count_parameters(s.model, s.model.vocab_size);
  const double flops_per_token = model_flops_per_token(s.model, s.model.vocab_size);
  const char* why = "step ops of experts and latent attention are not generated yet (docs/moe.md)";
  if (json) {
    nlohmann::json j;
    j["scenario"] = s.name;
    j["world_size"] = s.world_size();
    j["layout"] = layout_json(s);
    j["parameters_total"] = c.total;
    j["parameters_active"] = c.active;
    j["parameters_mtp"] = c.mtp;
    j["parameters_embedding"] = c.embedding;
    j["parameters_routed_experts"] = c.experts;
    j["model_flops_per_token"] = flops_per_token;
    j["model_flops_per_step"] = flops_per_token * static_cast<double>(s.tokens_per_step());
    if (s.model.moe.enabled()) j["experts"] = moe_json(s);
    j["step_ir"] = why;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  const ParallelConfig& p = s.parallel;
  std::printf("scenario   %s (%s on %lld x %s)\n", s.name.c_str(), s.model.preset.empty() ? "custom model" : s.model.preset.c_str(),
              static_cast<long long>(s.world_size()), s.topology.device.name.c_str());
  std::printf("layout     TP%lld PP%lld CP%lld DP%lld\n", (long long)p.tensor, (long long)p.pipeline, (long long)p.context,
              (long long)p.data);
  if (s.model.moe.enabled()) {
    const nlohmann::json e = moe_json(s);
    std::printf("experts    %lld routed (top-%lld) in %lld of %lld layers; EP%lld ETP%lld EDP%lld folded over each stage's "
                "TP x CP x DP ranks, experts per rank: %lld\n",
                (long long)e["num_experts"], (long long)e["moe_router_topk"], (long long)e["moe_layers"],
                (long long)s.model.num_layers, (long long)e["expert"], (long long)e["expert_tensor"],
                (long long)e["expert_data"], (long long)e["experts_per_rank"]);
    std::printf("routing    %s: the busiest EP rank gets %.2fx the mean tokens, the busiest expert %.2fx "
                "(worst MoE layer)\n",
                e["routing"]["model"].get<std::string>().c_str(), e["routing"]["ep_rank_max_over_mean"].get<double>(),
                e["routing"]["expert_max_over_mean"].get<double>());
  }
  std::printf("parameters %s total, %s active per token", count(c.total).c_str(), count(c.active).c_str());
  if (c.mtp > 0) std::printf(", %s in %lld MTP module(s) beside them", count(c.mtp).c_str(), (long long)s.model.moe.mtp_num_layers);
  const double step_flops = flops_per_token * static_cast<double>(s.tokens_per_step());
  std::printf("\nFLOPs      %.1f GFLOP per token (model, forward and backward), %.3g %s per step (%lld tokens)",
              flops_per_token / 1e9, step_flops >= 1e18 ? step_flops / 1e18 : step_flops / 1e15,
              step_flops >= 1e18 ? "EFLOP" : "PFLOP", static_cast<long long>(s.tokens_per_step()));
  std::printf("\nstep IR    %s: simulate, plan, execute and export refuse this model\n", why);
  return 0;
}

}  // namespace paralab::cli
