// paralab — the result of one training step, predicted (simulate) or measured (execute):
// per-op start/end times on every rank that ran (or stood for its stage), per-rank memory
// peaks, and the step-level figures derived from them the same way for both sources, so that
// `paralab compare` compares like with like.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/accounting.hpp"
#include "ir/step_ir.hpp"

namespace paralab {

struct OpTiming {
  int64_t rank = 0;
  OpId op = 0;
  double start_us = 0, end_us = 0;
  // When the op was ready on its rank (us). A call whose peers arrive later waits from here to
  // start_us (the simulator starts a call when its members have arrived); an op that waited
  // for nothing has posted_us = start_us. A measured op's start is its post (finalize aligns a
  // copy of the calls to their last arrival for the breakdown).
  double posted_us = 0;
};

// Where a rank's step time goes (Sec. "Breakdown" in docs/results.md): compute-stream busy
// time, communication that the compute stream waited for (exposed), split by group kind, and
// idle time with nothing in flight: waiting on another pipeline stage (bubble: a transfer or a
// collective joining stages posted and not yet begun, or the pipeline's fill and drain) or on
// a host (host: the dispatch and hand-off gaps between ops, a peer's late arrival at a
// collective within the stage).
struct Breakdown {
  double compute_s = 0;
  std::array<double, kCommClasses> exposed_comm_s{};
  double bubble_s = 0;
  double host_s = 0;
  // Device idle, nothing communicating, while an offload copy or host optimizer step runs
  // (docs/offload.md): the offload time the step does not hide.
  double offload_s = 0;
};

struct RankStats {
  int64_t rank = 0, stage = 0;
  double peak_memory_bytes = 0;  // resident + transient at the peak
  double peak_time_us = 0;       // when the peak happened
  OpId peak_op = 0;              // the op running at the peak
  Breakdown breakdown;           // this rank's, over the step's window (set by finalize)
  int64_t stands_for = 1;        // ranks it represents in the averages (per-rank mode: its class)
};

struct StepResult {
  std::string kind = "predicted";   // "predicted" | "measured"
  std::string backend = "simulator";// "simulator" | "cpu" | "cuda"
  std::string scenario;             // name
  std::string scenario_digest;      // hash of model, training and layout keys (not hardware)
  std::string topology;             // name of the topology used
  int64_t world_size = 0;
  std::vector<OpTiming> ops;        // sorted by (rank, op)
  std::vector<RankStats> ranks;     // the ranks that ran (simulator: one per stage)

  // Derived by finalize():
  double step_time_s = 0;
  double tokens_per_s = 0;
  double model_tflops_per_gpu = 0;
  double hardware_tflops_per_gpu = 0;
  double mfu = 0;
  double bubble_fraction = 0;
  double peak_memory_gib = 0;
  bool fits_in_memory = true;
  std::optional<int64_t> oom_rank;  // first rank over capacity, and when
  double oom_time_us = 0;
  Breakdown breakdown;              // averaged over the ranks that ran (weighted by stands_for)
  int64_t events = 0;               // simulator events processed / ops executed
  double wall_s = 0;                // wall time to produce the result
};

// Computes the derived figures from `ops` and `ranks` (peak memory from `ranks`).
void finalize(StepResult& r, const StepIR& ir);

// Length of the union of [a, b) intervals (sorted in place), in their unit.
double union_length(std::vector<std::pair<double, double>>& v);

// Per-rank breakdown from one rank's op timings (needs the IR for streams and groups), over
// the window [window_start_us, window_end_us] widened to the rank's own span: a rank idle
// before its first op or after its last one while the step still runs (the pipeline's fill and
// drain) spends that time in the bubble. finalize() passes the step's window; with the default
// (an empty window) the rank's own span is used.
Breakdown rank_breakdown(const StepIR& ir, int64_t rank, const std::vector<OpTiming>& ops,
                         double window_start_us = 1e300, double window_end_us = 0);

// Digest of the scenario keys that shape the IR (model, training, layout), independent of the
// hardware description, so a prediction and a measurement of the same scenario match.
std::string scenario_digest(const Scenario& s);

}  // namespace paralab
