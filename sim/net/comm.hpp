// paralab — what the event engine hands to the network model: one communication call of a
// representative rank, and the statistics the model keeps.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <optional>
#include <vector>

#include "ir/layout.hpp"
#include "ir/scenario.hpp"
#include "ir/step_graph.hpp"
#include "sim/net/topology_graph.hpp"

namespace paralab::sim {

enum class CollKind : uint8_t { all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, gather, scatter, p2p };
std::string_view to_string(CollKind k);
// The network's kind of an IR collective.
CollKind to_net(paralab::CollKind k);

// One call. `bytes` is per rank, as NCCL counts it: all_reduce: the buffer; reduce_scatter:
// the input (each rank keeps bytes/n); all_gather: the output (each rank contributes bytes/n);
// all_to_all: the total a rank sends (bytes/n to each peer, its own share included);
// broadcast, reduce: the buffer (members[0] is the root); gather: the root's output, scatter:
// the root's input (each member's part is bytes/n); p2p: the message, members = {src, dst}.
struct CommRequest {
  CollKind kind = CollKind::all_reduce;
  // automatic defers to the model's setting (SimulationConfig::collective_algorithm), which
  // in turn defers to the NCCL-like choice; anything else forces this call's algorithm.
  CollectiveAlgo algo = CollectiveAlgo::automatic;
  GroupKind group = GroupKind::world;  // which group kind the members form (for symmetric copies)
  std::vector<int64_t> members;        // global ranks of the representative instance, group order
  int64_t bytes = 0;
  // true: the call stands for every symmetric instance the layout implies and they load the
  // network too: the other tp/cp/dp groups of the stage; every (tp, cp, dp) translate of a
  // pp or embd group; every (cp, dp) translate of an mp group; world is one instance.
  // false: this instance alone (tests, or an engine that simulates every rank).
  bool symmetric_copies = true;
};

struct CommStats {
  uint64_t calls = 0;            // start() calls
  uint64_t finished = 0;         // calls completed
  uint64_t flows = 0;            // flows handed to the solver
  uint64_t settles = 0;          // timestamps at which rates were re-solved
  uint64_t resolves = 0;         // connected components re-solved
  uint64_t solver_work = 0;      // (flow, link) loads visited by the re-solves
  uint64_t patterns = 0;         // distinct (call shape, algorithm) patterns built and cached
  uint64_t routes = 0;           // cached device-to-device routes
  std::array<uint64_t, 4> calls_by_algo{};  // ring, tree, hierarchical, direct
  // Bytes times links crossed, per LinkClass, on the representative's links (symmetric copies
  // that cross those links included): a byte crossing NVLink to the switch and back counts 2.
  std::array<double, kLinkClasses> link_bytes{};
};

}  // namespace paralab::sim
