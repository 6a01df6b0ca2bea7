// paralab — the calibration's executions of a scenario (docs/calibration.md, "Executions"): the
// scenario of the job's size executed for real, as `paralab execute` runs it, warm-up steps then
// the measured ones, so that the corrections are fitted to the step the user will run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "exec/comm.hpp"
#include "ir/step_ir.hpp"
#include "results/step_result.hpp"

namespace paralab::calib {

// How much the executions measure: warm-up steps for kWarmupS (at least one), then steps until
// kMeasureS (at least kMinSteps, at most kMaxSteps), each a sample.
struct ExecutionPlan {
  static constexpr double kWarmupS = 0.3;
  static constexpr double kMeasureS = 2.0;
  static constexpr int kMinSteps = 3;
  static constexpr int kMaxSteps = 20;
};

// Whether a scenario of `world` ranks is executed by a calibration job of `job_ranks` ranks (every
// rank runs one of its ranks); the others are replayed op by op.
[[nodiscard]] inline bool executes_in_job(int64_t world, int64_t job_ranks) { return world == job_ranks; }

// Executes `ir` on every rank of `world` (collective: every rank calls it). Returns the measured
// steps on rank 0 (every rank's ops), nothing on the others.
std::vector<StepResult> execute_steps(const StepIR& ir, exec::Transport& world, const std::string& backend);

}  // namespace paralab::calib
