// paralab — validate's reference: the scenario executed for real, several launches of the job
// (`mpirun -np N paralab execute SCENARIO --trace-steps ...`), each measuring the steps that fit
// in a short window after its warm-up (docs/calibration.md, "Validate").
//
//   ReferenceRuns refs(opts, world, exe);
//   refs.run();             // launches until the budget
//   refs.step_times_s();    // every execution's step time (s), in order; refs.trace(k) its trace
//
// An execution is one measured step; a launch gives one or several (a launch's start-up and
// warm-up cost many short steps, so a short step is measured several times per launch).
#pragma once

#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/launch.hpp"
#include "analysis/validate/validate.hpp"

namespace paralab::calib {

class ReferenceRuns {
 public:
  // Without opts.runs: launches until about kBudgetS of them (judged by the mean launch so far),
  // at least kMinRuns, at most kMaxRuns.
  static constexpr double kBudgetS = 30.0;
  static constexpr int kMinRuns = 3, kMaxRuns = 15;
  // Per launch, after its warm-up: steps until kMeasureS of them (at least one), at most
  // opts.steps (default kStepsPerLaunch).
  static constexpr double kMeasureS = 0.4;
  static constexpr int kStepsPerLaunch = 8;

  ReferenceRuns(const ValidateOptions& opts, int64_t world, const std::filesystem::path& exe);
  // Every launch. Throws std::runtime_error (with the end of the child's output) when a launch
  // fails or says nothing of its steps.
  void run();
  [[nodiscard]] const std::string& command_line() const { return launch_; }
  // Executions (measured steps) so far, over all launches, and launches so far.
  [[nodiscard]] int count() const { return static_cast<int>(steps_s_.size()); }
  [[nodiscard]] int launches() const { return static_cast<int>(summaries_.size()); }
  [[nodiscard]] const std::vector<double>& step_times_s() const { return steps_s_; }
  // The execute --json summary of launch `l` (its last step's figures).
  [[nodiscard]] const nlohmann::json& summary(int launch) const { return summaries_.at(static_cast<size_t>(launch)); }
  [[nodiscard]] const std::vector<int>& launch_of() const { return launch_of_; }
  // The trace of execution `run` (0-based): work_dir/measured-<run>.json.
  [[nodiscard]] std::filesystem::path trace(int run) const;
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
  std::set<std::string> warned_;
  std::vector<std::string> warnings_;
};

}  // namespace paralab::calib
