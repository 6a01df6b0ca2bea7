// paralab — validate's reference: the scenario executed for real, several launches of the job
// (`mpirun -np N paralab execute SCENARIO --trace-steps ...`), each measuring the steps that fit
// in a short window after its warm-up, possibly in blocks between the calibration's in-situ
// launches (docs/calibration.md, "validate").
//
//   ReferenceRuns refs(opts, world, exe);
//   refs.run_block(0, 4);   // the first quarter of the launches (or of their time budget)
//   ...                     // something else on the machine: a calibration's launch
//   refs.run_block(3, 4);   // the last quarter
//   refs.step_times_s();    // every execution's step time (s), in order; refs.trace(k) its trace
//
// An execution is one measured step; a launch gives one or several. Why several: a step's
// per-op times are a sample whose noise the reference's per-op median only averages down with
// many of them, and a launch (mpirun, MPI set-up, half a second of warm-up) costs 20-30 steps
// of a 45 ms scenario. On the 2-core build machine, cpu-tp2-dp2-zero3's prediction scored
// 14.4 % op MAPE against 15 launches of one step and 11.9 % against 15 launches of 8 steps,
// whose halves (by launch) differed by 7.4 % against 16.7-20.8 % for one step of each;
// each of the 8 steps alone scored as one step per launch did (13.2-14.6 %)
// (bench/results/validate_cpu.md, "thirty-sixth session").
//
// Why blocks: validate --interleave runs a calibration's in-situ launches between them, so
// that a host whose pace moves over minutes shows the same minutes to both. On the 2-core build
// machine that did not narrow the drift between the two (bench/results/validate_cpu.md,
// "twenty-seventh session"), so it is not the default.
#pragma once

#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/launch.hpp"
#include "analysis/validate.hpp"

namespace paralab::calib {

class ReferenceRuns {
 public:
  // Without opts.runs: launches until about kBudgetS of them (each launch's cost, start-up and
  // warm-up included, judged by the mean so far), at least kMinRuns, at most kMaxRuns. On a
  // host whose ranks share cores a communication op's single-run time spreads over 10x
  // (bench/results/validate_cpu.md, "sixth session"): its median over 15 runs is a reference a
  // model can be scored against, over 3 it is not. At least 7 so that even a long step is
  // compared at a median that a few slow runs do not move, with halves to tell its noise
  // (kMinSplitRuns): quickstart (5.5 s steps, 3 runs in the budget) on one calibration scored
  // 11.2-19.0 % op MAPE against 3 runs (three references), 7.2 / 15.8 % against 5 and 9.5 /
  // 10.4 % against 7 ("thirtieth session"); its GEMM classes had scored 11-14 % against one
  // run and 7-9 % against 3 ("seventh session").
  static constexpr double kBudgetS = 30.0;
  static constexpr int kMinRuns = 7, kMaxRuns = 15;
  // Per launch, after its warm-up: steps until kMeasureS of them (at least one), at most
  // opts.steps (validate's default kStepsPerLaunch): 8 of a 45 ms step, one of a 5 s step.
  static constexpr double kMeasureS = 0.4;
  static constexpr int kStepsPerLaunch = 8;

  ReferenceRuns(const ValidateOptions& opts, int64_t world, const std::filesystem::path& exe);

  // Block `k` of `blocks` (0-based; blocks >= 1): the launches that bring the total to
  // round(runs * (k + 1) / blocks) with opts.runs, else those that fit in that share of the
  // time budget and the minimum. Throws std::runtime_error (with the end of the child's output)
  // when a launch fails or says nothing of its steps.
  void run_block(int k, int blocks);

  [[nodiscard]] const std::string& command_line() const { return launch_; }
  [[nodiscard]] const Launcher& launcher() const { return launcher_; }
  // Executions (measured steps) so far, over all launches, and launches so far.
  [[nodiscard]] int count() const { return static_cast<int>(steps_s_.size()); }
  [[nodiscard]] int launches() const { return static_cast<int>(summaries_.size()); }
  // Every execution's step time (s) and the launch it ran in (0-based), in execution order.
  [[nodiscard]] const std::vector<double>& step_times_s() const { return steps_s_; }
  [[nodiscard]] const std::vector<int>& launch_of() const { return launch_of_; }
  // The execute --json summary of launch `l` (its last step's figures).
  [[nodiscard]] const nlohmann::json& summary(int launch) const { return summaries_.at(static_cast<size_t>(launch)); }
  // The trace of execution `run` (0-based): work_dir/measured-<run>.json.
  [[nodiscard]] std::filesystem::path trace(int run) const;
  // Seconds spent executing (launches included), over all blocks.
  [[nodiscard]] double seconds() const { return spent_s_; }
  // The executions' "warning:" lines, each once, in the order first seen.
  [[nodiscard]] const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  void launch_one();

  const ValidateOptions& opts_;
  Launcher launcher_;
  std::vector<std::string> args_;  // the execute arguments every launch shares
  std::string launch_;
  std::vector<double> steps_s_;
  std::vector<int> launch_of_;
  std::vector<nlohmann::json> summaries_;
  double spent_s_ = 0;
  std::set<std::string> warned_;       // the executions' "warning:" lines, each passed on once
  std::vector<std::string> warnings_;  // the same, in order
};

}  // namespace paralab::calib
