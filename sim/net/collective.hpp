// paralab — collective algorithms as communication patterns (internal to sim/net).
//
// A builder turns a call on a group (its members, the topology) into phases; each phase is a
// latency followed by lockstep flows, each flow a list of transfers between members with the
// fraction of the call's bytes N that each transfer carries. The next phase starts when every
// flow of the previous one has finished. Builders never see bytes, so a pattern is built once
// per (call shape, algorithm) and scaled by N (see pattern.hpp).
//
// Adding an algorithm = one collective_<name>.cpp defining a BuildFn + one line in
// collective_registry.cpp. Closed forms and sources: docs/network.md, "Collectives".
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "sim/net/comm.hpp"
#include "sim/net/routing.hpp"

namespace paralab::sim {

enum class AlgoId : uint8_t { ring, tree, hierarchical, direct };
std::string_view to_string(AlgoId a);

struct Transfer {
  uint32_t src = 0, dst = 0;  // member indices
  double frac = 0;            // bytes moved = frac * N
};
struct LogicalFlow {
  std::vector<Transfer> transfers;  // all move in lockstep (one rate)
};
struct LogicalPhase {
  double latency_us = 0;            // paid before the phase's flows start
  std::vector<LogicalFlow> flows;   // run concurrently
};
struct LogicalPattern {
  std::vector<LogicalPhase> phases;
};

// What a builder may ask about the group and the machine.
class BuildContext {
 public:
  BuildContext(const std::vector<int64_t>& members, const TopologyGraph& graph, Router& router,
               double step_lat_us);

  [[nodiscard]] uint32_t size() const { return static_cast<uint32_t>(members_.size()); }
  [[nodiscard]] double step_lat_us() const { return step_lat_us_; }
  // Latency of the route from member a to member b (sum of link latencies).
  [[nodiscard]] double path_lat_us(uint32_t a, uint32_t b) const;
  // Members grouped by node, node-major as NCCL orders rings: nodes ascending, members of a
  // node by local device.
  [[nodiscard]] const std::vector<std::vector<uint32_t>>& by_node() const { return by_node_; }
  [[nodiscard]] size_t nodes() const { return by_node_.size(); }
  [[nodiscard]] bool uniform() const { return uniform_; }  // same member count on every node
  // Channels (parallel rings / tree pairs): 1 inside one node (they would share the same
  // links); across nodes, one per distinct NIC the members of a node use (the fewest over
  // nodes), so inter-node bandwidth aggregates over NICs as NCCL's rings do.
  [[nodiscard]] int64_t channels() const { return channels_; }
  // Members of by_node()[pos] rotated to start at channel c's entry member (the c-th member
  // using a new NIC); the last one of the rotation exits the node.
  [[nodiscard]] std::vector<uint32_t> node_order(size_t pos, int64_t c) const;
  // The ring of channel c: every node's node_order concatenated, node-major.
  [[nodiscard]] std::vector<uint32_t> ring_order(int64_t c) const;

 private:
  const std::vector<int64_t>& members_;
  Router& router_;
  double step_lat_us_;
  std::vector<std::vector<uint32_t>> by_node_;
  std::vector<std::vector<uint32_t>> entry_;  // per node: positions starting a new NIC
  int64_t channels_ = 1;
  bool uniform_ = true;
};

// Helpers shared by the builders.
// Adds order[i] -> order[i+1] for every i (and last -> first when `closed`), each carrying frac.
void add_chain(LogicalFlow& flow, const std::vector<uint32_t>& order, double frac, bool closed);
// Largest path latency among a flow's transfers.
double max_path_lat_us(const BuildContext& ctx, const LogicalFlow& flow);
// steps * (step latency + the slowest transfer's path latency): a pipelined algorithm of
// `steps` dependent steps.
double steps_latency_us(const BuildContext& ctx, const LogicalFlow& flow, int64_t steps);

using BuildFn = LogicalPattern (*)(const BuildContext&);

// Builders (one file per algorithm).
LogicalPattern build_ring_all_reduce(const BuildContext& ctx);
LogicalPattern build_ring_all_gather(const BuildContext& ctx);
LogicalPattern build_ring_reduce_scatter(const BuildContext& ctx);
LogicalPattern build_ring_broadcast(const BuildContext& ctx);
LogicalPattern build_ring_reduce(const BuildContext& ctx);
LogicalPattern build_direct_gather(const BuildContext& ctx);
LogicalPattern build_direct_scatter(const BuildContext& ctx);
LogicalPattern build_tree_all_reduce(const BuildContext& ctx);
LogicalPattern build_hier_all_reduce(const BuildContext& ctx);
LogicalPattern build_hier_all_gather(const BuildContext& ctx);
LogicalPattern build_hier_reduce_scatter(const BuildContext& ctx);
LogicalPattern build_direct_all_to_all(const BuildContext& ctx);
LogicalPattern build_direct_p2p(const BuildContext& ctx);

// The registry: (collective kind, requested algorithm) -> builder.
struct AlgoEntry {
  CollKind kind;
  CollectiveAlgo algo;  // automatic: the kind's only algorithm, answers every request
  AlgoId id;
  BuildFn build;
};
std::span<const AlgoEntry> algorithm_registry();
// Index into algorithm_registry() of the entry for (kind, algo): the exact entry, else the
// kind's default (its first entry, ring or direct), as NCCL falls back to ring when an
// algorithm does not support a collective.
size_t find_algorithm(CollKind kind, CollectiveAlgo algo);

// The in-order binary tree over 0..m-1 used by the double binary tree (parent per node, -1 for
// the root), and the depth (edges from the root to the deepest node) of a parent array.
std::vector<int64_t> inorder_tree(int64_t m);
int64_t tree_depth(const std::vector<int64_t>& parent);

}  // namespace paralab::sim
