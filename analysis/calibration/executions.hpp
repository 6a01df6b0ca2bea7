// paralab — the calibration's in-situ executions (docs/calibration.md, "In-situ execution"):
// each scenario of the job's size executed for real, its executions spread over several
// launches of the job.
//
//   const InSituPlan plan{4};                                    // this launch: its share of 4
//   std::vector<StepResult> mine = execute_in_situ(ir, world, "cpu", plan, progress);
//   write_in_situ_traces(dir / "launch-1", 0, ir, mine);          // rank 0 of an earlier launch
//   InSituTraces earlier = read_in_situ_traces(dir, 0, ir);       // rank 0 of the measuring job
//
// Why several launches: one `mpirun` launch draws its own pace, and the executions inside it
// share it. On the 2-core build machine ten launches of cpu-tp2 ran their steps at medians of
// 19.3-23.6 ms (within a launch, most steps within 5 % of its median), and six calibrations'
// ten in-situ executions each gave medians of 19.7-23.5 ms: a calibration of one launch holds
// one draw of that, and the prediction follows it (bench/results/validate_cpu.md,
// "twenty-fifth session").
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "exec/comm.hpp"
#include "ir/step_ir.hpp"
#include "results/step_result.hpp"

namespace paralab::calib {

// How much one launch executes. Over all launches: measured steps until they total kMeasuredS
// (a small step's few dozen collectives vary 2x between executions on a shared host), at most
// kMaxExecutions; each launch its share, at least one execution. An execution is warm-up
// steps, then the steps that fit in kStepsS (at least one, at most kStepsPerExecution), each
// a measured step, as validate's launches measure theirs (reference_runs.hpp: the steps of a
// launch are nearly as good samples as launches, and a short step's in-situ figures had come
// from 12 steps).
struct InSituPlan {
  static constexpr double kMeasuredS = 4.0;  // s, over all launches
  static constexpr int kMaxExecutions = 10;  // over all launches
  static constexpr double kWarmupS = 0.2;    // s of warm-up steps before each execution (at least one)
  static constexpr double kStepsS = 0.4;     // s of measured steps per execution (at least one)
  static constexpr int kStepsPerExecution = 8;
  static constexpr int kDefaultLaunches = 4;
  int launches = 1;  // launches the executions spread over, this one included
  [[nodiscard]] double measured_s() const { return kMeasuredS / launches; }
  [[nodiscard]] int max_executions() const { return std::max(1, (kMaxExecutions + launches - 1) / launches); }
};

// Whether a scenario of `world` ranks is executed in situ by a calibration job of `job_ranks`
// ranks (its own size: every rank runs one of its ranks); the others are replayed. The CLI,
// the earlier launches and the measuring job must agree on it (a trace's index is the
// scenario's place among them all).
[[nodiscard]] inline bool executes_in_situ(int64_t world, int64_t job_ranks) { return world == job_ranks; }

// Executes `ir` on every rank of `world` (collective: every rank calls it) as validate's
// launches do, warm-up steps then the measured ones per execution, until this launch's share of
// the plan. Returns the measured steps on rank 0 (every rank's ops), nothing on the others. `progress`
// (may be empty) gets units done, 4 in all.
std::vector<StepResult> execute_in_situ(const StepIR& ir, exec::Transport& world, const std::string& backend,
                                        const InSituPlan& plan, const std::function<void(double, const std::string&)>& progress);

// An earlier launch's executions of scenario number `index` (its place on the command line),
// as `execute --trace` writes them: `dir`/s<index>-r<run>.json.
void write_in_situ_traces(const std::filesystem::path& dir, size_t index, const StepIR& ir, const std::vector<StepResult>& runs);

struct InSituTraces {
  std::vector<StepResult> runs;  // in launch order, then run order
  int launches = 0;              // directories they came from
};
// Every trace of scenario `index` under `root` (one directory per launch). A trace of another
// scenario (digest), or one without per-op timings, is a std::runtime_error naming the file.
InSituTraces read_in_situ_traces(const std::filesystem::path& root, size_t index, const StepIR& ir);

}  // namespace paralab::calib
