// paralab — the discrete-event engine: one optimizer step of a StepIR on modeled hardware.
//
// One representative rank per pipeline stage (Layout::representative) runs its stage's
// StepGraph; every other rank of the stage runs the same graph at the same times (their
// collectives are the network model's symmetric copies). In per-rank mode (EngineOptions::
// classes) one rank per class of identical ranks runs instead, and a call starts when every
// class in its group has reached it. Per rank, streams have CUDA
// semantics: an op starts when it is at the head of its stream (its predecessor on the stream
// has finished) and every op in `deps` has finished, plus a measured dispatch gap after a
// same-stream predecessor or hand-off gap after a dependency on another stream, whichever ended
// last (overhead.hpp; none without a correction table). Compute ops take the compute model's
// duration (slowed beside communication, or waiting for a core of a CPU node whose ranks
// outnumber its cores: core_share.hpp), corrected where the table says; communication ops are
// calls on the NetworkModel, their time corrected likewise:
//   - collectives over tp / cp / dp groups lie within one stage and start at once;
//   - send / recv (pp) start when both the send and the matching recv (same tag, on the peer
//     stage) are ready, and both finish when the transfer does;
//   - collectives over embd / mp / world groups start when every stage of the group has
//     reached them (matched by tag and occurrence) and finish together;
//   - sendrecv (context-parallel ring) is symmetric within a stage: the whole ring shift is
//     started at once, one transfer per ring edge.
// Memory: an op's `allocs` are allocated when it starts (for a transfer: when it is posted),
// its `frees` freed when it ends; resident buffers are live from the start (host buffers count
// as host memory). Ops off the device (offload's copies and host steps) take their duration on
// their own stream, beside the GPU's compute and unslowed by it.
//
// Events are ordered by (time, sequence number), sequence numbers handed out in a fixed order,
// so the same input gives bit-identical output. The engine is single-threaded and keeps no
// global state: independent simulations may run on any number of threads.
#pragma once

#include <array>
#include <utility>
#include <cstdint>
#include <optional>
#include <vector>

#include "ir/step_ir.hpp"
#include "results/step_result.hpp"
#include "sim/compute/compute_model.hpp"
#include "sim/net/invariants.hpp"
#include "sim/net/network_model.hpp"

namespace paralab::sim {

// Memory of one simulated rank over the step.
struct RankMemory {
  int64_t rank = 0, stage = 0;
  std::array<double, kMemCategories> resident{};  // bytes held for the whole step
  std::array<double, kMemCategories> at_peak{};   // transient bytes by category at the peak
  double peak_transient = 0;                      // max over time of the transient bytes
  double peak_time_us = 0;                        // when it was first reached
  OpId peak_op = 0;                               // the op whose start reached it
  // The first moment the rank's memory exceeded the device's capacity, if it did.
  std::optional<double> over_capacity_us;
  OpId over_capacity_op = 0;
  double host_resident = 0;                       // pinned host bytes (offload), not the device's

  [[nodiscard]] double resident_total() const;
  [[nodiscard]] double peak_total() const { return resident_total() + peak_transient; }
};

struct RankClasses;  // rank_classes.hpp

struct EngineOptions {
  bool record_ops = true;  // fill EngineOutput::ops (needed by finalize and traces)
  // Check the simulator's invariants while running (sim/engine/invariants.hpp): time never
  // goes backwards, every op runs exactly once, every transfer is matched with equal bytes,
  // memory returns to its steady state; a violation throws InternalError. Read-only: results
  // are bit-identical either way. Default: on in debug builds, off in release.
  bool check_invariants = kCheckInvariantsByDefault;
  // Per-rank mode (rank_classes.hpp): one simulated unit per class instead of per stage, each
  // with its hardware's durations; `node_models[g]` times node group g's compute. Null: one
  // representative per stage.
  const RankClasses* classes = nullptr;
  std::vector<const ComputeModel*> node_models;
};

struct EngineOutput {
  std::vector<OpTiming> ops;       // every op of every simulated rank, sorted by (rank, op)
  std::vector<RankStats> ranks;    // one per simulated unit (stage, or class in per-rank mode)
  std::vector<RankMemory> memory;  // likewise
  // The critical path, walked back from the op that ended last through what released each op
  // last (a dependency or stream predecessor; for a call, its last member to arrive): compute
  // time on it per simulated rank (most first) and communication time on it per group kind.
  std::vector<std::pair<int64_t, double>> critical_compute_us;
  std::array<double, static_cast<size_t>(GroupKind::kCount)> critical_comm_us{};
  int64_t events = 0;              // engine events (op completions) + network events
  int64_t ops_run = 0;
  double end_us = 0;               // when the last op ended
};

// Runs one step. `net` must be fresh (built for ir.layout). Throws InternalError if the graphs
// cannot complete (an op never becomes ready), naming the stuck ops. With check_invariants the
// engine also checks, at the end, that `net` has drained (NetworkModel::check_drained); the
// network's own checks follow its setting (NetworkModel::set_check_invariants).
EngineOutput run_engine(const StepIR& ir, const ComputeModel& compute, NetworkModel& net,
                        const EngineOptions& options = {});

}  // namespace paralab::sim
