// paralab — the IR of one optimizer step for a whole layout: one StepGraph per pipeline stage.
// Ranks that differ only in their tensor, context or data-parallel coordinate run identical
// graphs (their collectives have the same shape; only group members and pipeline peers
// differ, and those follow from the Layout), so a stage's graph stands for all its ranks.
#pragma once

#include <vector>

#include "ir/layout.hpp"
#include "ir/model_shape.hpp"
#include "ir/scenario.hpp"
#include "ir/step_graph.hpp"

namespace paralab {

struct StepIR {
  Scenario scenario;
  Layout layout;
  ModelShape shape;
  std::vector<StepGraph> stages;  // index = pipeline stage

  [[nodiscard]] const StepGraph& graph_for(int64_t rank) const {
    return stages.at(static_cast<size_t>(layout.stage_of(rank)));
  }
  // Concrete ranks of a collective's group, or a transfer's peer, for a given rank.
  [[nodiscard]] std::vector<int64_t> group_of(int64_t rank, const Op& op) const;
  [[nodiscard]] int64_t peer_of(int64_t rank, const Op& op, bool send) const;
};

// Generates the IR. `threads` > 1 builds stages concurrently (the result is identical).
StepIR build_step_ir(const Scenario& s, int threads = 1);

// Refuses (ConfigError) a model the step IR cannot generate yet: experts (model.num_experts >
// 0) and multi-head latent attention are loaded, validated and counted (`inspect`), but their
// ops are not generated (docs/moe.md). build_step_ir and the planner call it first.
void require_generated_model(const Scenario& s);

// The ranks behind one NVLink switch fabric: the topology's NVLink domain when the cluster fills
// its hosts (several hosts for GB200 NVL72), else the cluster's devices per node. The layout's
// "node" is this domain: what shares intra-node links, and what "within a node" means.
int64_t nvlink_domain_devices(const Scenario& s);
Layout layout_of(const Scenario& s);

}  // namespace paralab
