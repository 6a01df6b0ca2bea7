// paralab — trace replay: simulates a TraceSet (trace.hpp; e.g. Chakra execution traces read
// by chakra/) on a topology, every rank individually, with the network model of sim/net.
//
// Why not the event engine (sim/engine): it replays StepIR graphs, one representative rank per
// stage or per class of identical ranks, with streams, group kinds and the layout's symmetric
// copies built in. A foreign trace has none of that: arbitrary per-rank graphs, named process
// groups, peers by rank. So this is a small scheduler of its own that shares the engine's cost
// code: every collective and transfer is a NetworkModel call (the same collective algorithms,
// routes and max-min fair flows; symmetric_copies off, since every rank is simulated).
//
// Semantics (docs/interop.md, "Chakra"):
//   - a node is ready when every node it depends on has finished;
//   - compute nodes run one at a time per rank and queue in order of readiness (one GPU queue,
//     one CPU queue for host ops), as ASTRA-sim runs them; their time is the recorded duration,
//     else max(flops / (bf16 peak x gemm efficiency), bytes / (HBM bandwidth x efficiency));
//   - a collective of group G on rank r is matched with the collectives of G on the other members
//     by occurrence (the k-th of G in each member's file); it starts when the last member is
//     ready and ends for all members when the network call does (at once: a group of one, 0 bytes);
//   - a send from a to b with tag t is matched with b's receive from a with tag t (the k-th with
//     the k-th); the transfer starts when both are ready and ends both;
//   - nodes of no kind (metadata, memory) take their recorded duration, else none.
// Deterministic: equal-time events are ordered by a sequence number.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "ir/topology.hpp"
#include "sim/net/comm.hpp"
#include "sim/replay/trace.hpp"

namespace paralab::sim::replay {

struct ReplayOptions {
  bool record_nodes = true;  // fill ReplayResult::nodes
  CollectiveAlgo algo = CollectiveAlgo::automatic;
};

struct NodeTiming {
  int64_t rank = 0;
  uint32_t node = 0;     // index in the rank's trace
  double ready_us = 0;   // every dependency done
  double start_us = 0, end_us = 0;
};

// One rank over the step (us): compute busy (GPU queue), host ops (CPU queue), time with a
// communication in flight, communication the GPU queue was not busy beside (exposed), idle.
struct RankReplay {
  int64_t rank = 0;
  int64_t nodes = 0;
  double compute_us = 0, cpu_us = 0, comm_us = 0, exposed_comm_us = 0, idle_us = 0;
  double end_us = 0;     // when its last node ended
};

struct ReplayResult {
  double step_us = 0;    // the last node's end (the step starts at 0)
  std::vector<RankReplay> ranks;
  // The critical path, walked back from the node that ended last through what released each
  // node (its last dependency, the compute it queued behind, a call's last member to arrive):
  // its compute, its communication and its gaps add up to step_us.
  double critical_compute_us = 0, critical_comm_us = 0, critical_wait_us = 0;
  int64_t critical_nodes = 0;
  std::array<int64_t, 5> nodes_by_kind{};  // indexed by NodeKind
  std::vector<NodeTiming> nodes;           // sorted by (rank, node)
  CommStats network;
  int64_t events = 0;
};

// Replays `set` on `topo`. `set.devices_per_node` (or the topology's NVLink domain) places
// consecutive ranks on one node. Throws TraceError for what check_trace_set rejects, for calls
// whose members disagree (type, size) and, naming each stuck rank's first node that never ran,
// when the traces cannot complete (an unmatched send, receive or collective).
ReplayResult replay(const TraceSet& set, const Topology& topo, const ReplayOptions& options = {});

// A compute node's time without a recorded duration: the roofline above, plus the device's
// launch overhead when it has any work.
double priced_compute_us(const TraceNode& node, const DeviceSpec& device);

}  // namespace paralab::sim::replay
