// paralab exec — one `paralab execute` run on this process: plan the rank, create the backend
// and its communicators, (verify), run the step(s), gather every rank's measurements to rank 0
// and turn them into the shared StepResult (results/step_result.hpp). Collective over the
// Transport's world; throws ExecError (naming the rank) on any failure.
#pragma once

#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "exec/comm.hpp"
#include "exec/device_identity.hpp"
#include "exec/runtime.hpp"
#include "exec/verify.hpp"
#include "results/step_result.hpp"

namespace paralab::exec {

struct ExecuteOptions {
  std::string backend = "cpu";
  bool verify = false;
  double watchdog_s = 60;
  int64_t steps = 1;  // optimizer steps run after the warm-up; the last one is measured
  // With measure_s > 0: steps after the warm-up until they took this long (s; at least one,
  // at most `steps`; rank 0's clock decides for all), so that a short step is sampled several
  // times per launch and a long one once (validate's reference: docs/calibration.md, "validate").
  double measure_s = 0;
  // Warm-up steps first, until they took this long (s; at least one step when > 0; rank 0's
  // clock decides for all). On the 2-core build machine a launch's first 0.05-0.15 s of steps
  // ran 1.3-2x slower than the steady state (docs/executor.md, "Several steps").
  double warmup_s = 0;
  // Keep every step after the warm-up, not only the last (ExecuteOutcome::steps): validate's
  // reference takes each as a sample of its launch (docs/calibration.md, "validate").
  bool keep_steps = false;
  FaultInjection fault;
  // A slowed rank (exec/slowdown.hpp): rank `slow_rank`'s compute ops run `slowdown` times on
  // average (extra runs into scratch; results unchanged). -1: none; slowdown in [1, 100].
  int64_t slow_rank = -1;
  double slowdown = 1.0;
};

struct RankReport {
  int64_t rank = 0, stage = 0;
  MemoryStats memory;
  double rss_peak_bytes = 0;  // process resident-set high-water mark (getrusage)
  int64_t ops_run = 0;
  int64_t extra_runs = 0;  // of the measured step: runs beyond each op's first (a slowed rank)
  std::map<std::string, double> device;  // Backend::device_stats (cuda: allocator high-water marks, ...)
};

struct ExecuteOutcome {
  bool root = false;          // rank 0: the fields below are filled
  StepResult result;          // measured, finalized
  // With keep_steps: every step after the warm-up, in order, each finalized as `result` is (the
  // last is `result`). Ranks' memory statistics are the last step's in all of them.
  std::vector<StepResult> steps;
  std::vector<RankReport> ranks;
  double loss = 0;            // mean per-token training loss of the measured step
  // Every step's time (s), the measured (last) one included: earliest op start to latest op
  // end over all ranks, as the measured step's. Shows warm-up and a run's drift.
  std::vector<double> step_times_s;
  int64_t warmup_steps = 0;  // how many of them were warm-up (the first ones)
  // Rank 0's wall time by phase (s): backend and runtime set-up (device, streams, resident state
  // allocated and filled), the warm-up steps, the measured steps, and gathering the results.
  // The steps' own times are step_times_s; these say where the rest of `wall_s` went.
  double setup_s = 0, warmup_s = 0, steps_s = 0, gather_s = 0;
  int core_turns = 0;         // rank 0's host: core turns its ranks took (exec/core_turns.hpp), 0: none
  bool core_turns_batch = false;  // rank 0's threads took them under SCHED_BATCH (use_batch_scheduling)
  bool doorbells = false;     // the ranks of a host woke each other's sleeping pollers (exec/doorbells.hpp)
  // Rank 0's device where it is not the host (Backend::device_identity). Where the scenario's
  // topology is a CPU host's, the measured MFU is against this device's peak.
  std::optional<DeviceIdentity> device;
  int64_t slow_rank = -1;      // ExecuteOptions::slow_rank, slowdown
  double slowdown = 1.0;
  bool verified = false;
  VerifyReport verify;        // merged over ranks
  bool verify_failed = false; // on every rank
};

ExecuteOutcome execute(const StepIR& ir, Transport& world, const ExecuteOptions& opts);

// Memory the IR says rank `rank` needs at its peak (bytes), for the pre-run check.
double planned_peak_bytes(const StepIR& ir, int64_t rank);

// The summary JSON of an outcome: results/result_io.hpp's fields plus the executor's extras
// (loss, per-rank memory by category and process RSS, verification).
nlohmann::json outcome_json(const ExecuteOutcome& out);

}  // namespace paralab::exec
