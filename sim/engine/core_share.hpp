// paralab — what a simulated rank's compute shares its processors with (sim/engine;
// docs/simulator.md, "Compute beside communication" and "Shared cores").
//
// Three regimes, chosen once from the topology and the layout:
//   - sms (GPU): communication kernels hold SMs; compute runs on the rest at
//     rate = max(1, SMs - held) / SMs.
//   - rank_cores (CPU host, every rank with its own sm_count cores): a communication thread,
//     while its call moves data, shares the rank's cores with the compute thread,
//     rate = cores / (cores + busy communication threads).
//   - node_cores (CPU host whose ranks outnumber NodeSpec::cores): the node's cores are a pool
//     (sim/engine/core_pool.hpp) that the compute ops of every rank on the node take turns on.
//     No rate: an op runs at full speed once it has a core.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ir/step_ir.hpp"

namespace paralab::sim {

class CoreShare {
 public:
  enum class Mode : uint8_t { none, sms, rank_cores, node_cores };

  explicit CoreShare(const StepIR& ir);

  [[nodiscard]] Mode mode() const { return mode_; }
  // The rate (0, 1] at which a stage's compute progresses beside communication calls that
  // hold `held` SMs (sms: at least one SM's worth) or threads (rank_cores: the fair share);
  // 1 in the other regimes.
  [[nodiscard]] double rate(int64_t held) const;

  // node_cores: the node's cores, the pool (node) of each stage (its representative's node),
  // and how many of a stage's ranks are on that node (they run its ops together).
  [[nodiscard]] int64_t cores() const { return cores_; }
  [[nodiscard]] int64_t nodes() const { return nodes_; }
  [[nodiscard]] int64_t node_of_stage(uint32_t s) const { return node_of_stage_[s]; }
  [[nodiscard]] int64_t ranks_on_node(uint32_t s) const { return ranks_on_node_[s]; }
  // The cores a claim of stage `s` takes (its ranks there, at most the node's), and how many
  // turns its ranks take on them (ranks / those cores: 1 unless they outnumber the cores).
  [[nodiscard]] int64_t claim_cores(uint32_t s) const { return std::min(ranks_on_node_[s], cores_); }
  [[nodiscard]] double turns(uint32_t s) const { return turns_of(ranks_on_node_[s], cores_); }
  // The turns `ranks` of one stage take on a node's `cores` shared cores: ranks / min(ranks, cores).
  [[nodiscard]] static double turns_of(int64_t ranks, int64_t cores) {
    return ranks > 0 && cores > 0 ? static_cast<double>(ranks) / static_cast<double>(std::min(ranks, cores)) : 1.0;
  }

 private:
  Mode mode_ = Mode::none;
  int64_t sms_ = 1;  // DeviceSpec::sm_count (SMs or cores per rank)
  int64_t cores_ = 0, nodes_ = 0;
  std::vector<int64_t> node_of_stage_, ranks_on_node_;
};

}  // namespace paralab::sim
