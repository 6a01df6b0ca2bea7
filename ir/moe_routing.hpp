// paralab — how a step's routed tokens spread over experts and expert-parallel ranks, from the
// routing model of [model] (ir/moe_config.hpp). Shares are of the T x top-k token copies a
// layer routes; top-k picks distinct experts, so no expert gets more than 1/top-k of them (a
// skewed share above that is capped and the excess spread over the others in proportion).
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "ir/moe_config.hpp"

namespace paralab {

// Per-expert shares of the routed token copies of MoE layer `moe_layer` (0-based among the MoE
// layers), summing to 1. Deterministic for a seed.
std::vector<double> expert_shares(const MoEConfig& e, int64_t moe_layer);

struct RoutingLoad {
  double ep_rank_max_over_mean = 1;  // the busiest EP rank's tokens over the mean (1: balanced)
  double expert_max_over_mean = 1;   // the busiest expert's tokens over the mean
  int64_t busiest_ep_rank = 0;
};
// Experts are placed on EP ranks in contiguous blocks of num_experts / ep (Megatron).
RoutingLoad routing_load(const std::vector<double>& shares, int64_t ep);

// Reads measured per-expert token counts (CSV: one row of num_experts non-negative numbers per
// MoE layer, or one row for all; '#' comments) into rows; ConfigError naming file, line and key.
std::vector<std::vector<double>> read_routing_counts(const std::filesystem::path& file, int64_t num_experts,
                                                     int64_t moe_layers, const std::string& key);

}  // namespace paralab
