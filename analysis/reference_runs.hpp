// paralab — validate's reference: the scenario executed for real, several times, each run a
// launch of its own (`mpirun -np N paralab execute SCENARIO --trace ...`), possibly in blocks
// between the calibration's in-situ launches (docs/calibration.md, "validate").
//
//   ReferenceRuns refs(opts, world, exe);
//   refs.run_block(0, 4);   // the first quarter of the runs (or of their time budget)
//   ...                     // something else on the machine: a calibration's launch
//   refs.run_block(3, 4);   // the last quarter
//   refs.step_times_s();    // every run's step time (s), in run order; refs.trace(k) its trace
//
// Why blocks: validate --interleave runs a calibration's in-situ launches between them, so
// that a host whose pace moves over minutes shows the same minutes to both. On the 2-core build
// machine that did not narrow the drift between the two (bench/results/validate_cpu.md,
// "twenty-seventh session"), so it is not the default.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/launch.hpp"
#include "analysis/validate.hpp"

namespace paralab::calib {

class ReferenceRuns {
 public:
  // Without opts.runs: executions until about kBudgetS of them (each run's cost, launch and
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

  ReferenceRuns(const ValidateOptions& opts, int64_t world, const std::filesystem::path& exe);

  // Block `k` of `blocks` (0-based; blocks >= 1): the runs that bring the total to
  // round(runs * (k + 1) / blocks) with opts.runs, else those that fit in that share of the
  // time budget and the minimum. Throws std::runtime_error (with the end of the child's output)
  // when a run fails.
  void run_block(int k, int blocks);

  [[nodiscard]] const std::string& command_line() const { return launch_; }
  [[nodiscard]] const Launcher& launcher() const { return launcher_; }
  [[nodiscard]] int count() const { return static_cast<int>(steps_s_.size()); }
  [[nodiscard]] const std::vector<double>& step_times_s() const { return steps_s_; }
  [[nodiscard]] const std::vector<nlohmann::json>& summaries() const { return summaries_; }
  // The trace of run `run` (0-based): work_dir/measured-<run>.json.
  [[nodiscard]] std::filesystem::path trace(int run) const;
  // Seconds spent executing (launches included), over all blocks.
  [[nodiscard]] double seconds() const { return spent_s_; }

 private:
  void run_one();

  const ValidateOptions& opts_;
  Launcher launcher_;
  std::vector<std::string> args_;  // the execute arguments every run shares
  std::string launch_;
  std::vector<double> steps_s_;
  std::vector<nlohmann::json> summaries_;
  double spent_s_ = 0;
};

}  // namespace paralab::calib
