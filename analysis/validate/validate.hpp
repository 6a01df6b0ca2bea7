// paralab — `paralab validate`: simulate, execute and compare a scenario in one go
// (docs/calibration.md, "Validate").
//
//   1. calibration: the given file, else the cached one for (host, backend, ranks, scenario,
//      paralab version), else `paralab calibrate SCENARIO` makes it (and the cache keeps it);
//   2. simulate the scenario on the calibrated topology;
//   3. execute it for real: several launches of `mpirun -np N paralab execute SCENARIO
//      --trace-steps ...` (reference_runs.hpp), each warm-up steps then the steps measured;
//   4. compare op by op against the reference, each op at its median over the executions
//      (communication timed from its last arrival, as the simulator times it), and say how much
//      the executions themselves differ: where that bounds the result, validate says so.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/validate/compare.hpp"
#include "ir/step_ir.hpp"
#include "results/result_io.hpp"

namespace paralab::calib {

// Where calibrations are cached: $PARALAB_CACHE_DIR, else $XDG_CACHE_HOME/paralab, else
// ~/.cache/paralab, else <tmp>/paralab-cache-<uid>; calibrations under calibration/<host>/.
std::filesystem::path cache_dir();
// The cached calibration for a scenario (need not exist yet): keyed by host, backend, ranks,
// the scenario's name and digest (model, training, layout) and the paralab version.
std::filesystem::path cached_calibration_path(const Scenario& s, const std::string& backend);

struct ValidateOptions {
  std::filesystem::path scenario;
  std::vector<std::string> sets;
  std::string backend = "cpu";
  std::filesystem::path calibration;  // empty: cached, or made now
  bool recalibrate = false;           // ignore the cache
  bool quick_calibration = false;     // calibrate --quick when one is made
  int steps = 0;                      // per launch at most (0: ReferenceRuns::kStepsPerLaunch)
  double warmup_s = 0.5;              // per launch, before its measured steps
  int runs = 0;                       // launches (0: as many as fit ReferenceRuns::kBudgetS)
  std::filesystem::path paralab;      // the executable to launch (default: this one)
  std::filesystem::path work_dir;     // traces go here (created)
  double timeout_s = 3600;            // per child process
  // A slowed rank (`execute --slow-rank R --slowdown F`, exec/slowdown.hpp): the executions run
  // with it, the simulation adds it as a straggler ([[variation.straggler]] rank R, slowdown F).
  // The calibration is the machine's, made and matched without it. -1: none.
  int64_t slow_rank = -1;
  double slowdown = 1.0;
  std::function<void(const std::string&)> log;               // what happens, for people
  std::function<void(double, const std::string&)> progress;  // calibration progress
};

struct ValidateOutcome {
  std::string scenario;
  int64_t slow_rank = -1;  // ValidateOptions::slow_rank, slowdown
  double slowdown = 1.0;
  std::filesystem::path calibration;
  bool calibration_made = false;
  std::string launch;                // the execute command line
  LoadedResult predicted, measured;  // measured: the reference (per-op medians, communication aligned)
  nlohmann::json measured_summary;   // execute --json of the last launch, with the reference's figures
  Comparison comparison;
  std::vector<double> run_step_times_s;
  int runs = 1, launches = 1;
  // How much the executions differ (runs > 1; else 0): (max - min) / median of their steps, the
  // MAPE of one execution's ops against another's (mean over ordered pairs), and of each
  // execution's against the reference (mean over executions).
  double run_to_run_step_spread_pct = 0;
  double run_to_run_op_mape_pct = 0;
  double reference_spread_pct = 0;
  // How much longer the executions' compute streams run on average than the medians of their
  // ops and of the gaps between them (%): the host's tail, which a model of typical op times
  // (the corrections are robust fits) does not carry.
  double tail_pct = 0;
  // The calibration's executions of this scenario (same digest; 0: none) against these runs'
  // median step: how far the machine moved since it calibrated.
  struct HostDrift {
    int64_t executions = 0;
    double calibrated_step_s = 0, measured_step_s = 0;
    [[nodiscard]] double pct() const { return calibrated_step_s > 0 ? 100.0 * (measured_step_s - calibrated_step_s) / calibrated_step_s : 0.0; }
  } host_drift;
  static constexpr double kHostDriftWarnPct = 10.0;
  // What bounds the result: a step error or op MAPE within the executions' own spread, the host's
  // drift since calibrating, what the executions warned of. Each line is also logged.
  std::vector<std::string> warnings;
  double calibrate_s = 0, simulate_s = 0, execute_s = 0, total_s = 0;
};

// Throws ConfigError (bad scenario) or std::runtime_error (a child failed; the message has the
// end of its output).
ValidateOutcome validate(const ValidateOptions& opts);

// DESIGN.md's fields: predicted, measured, step_time_error_pct, op_mape_pct; and the details.
nlohmann::json validate_json(const ValidateOutcome& v);
std::string validate_table(const ValidateOutcome& v);

}  // namespace paralab::calib
