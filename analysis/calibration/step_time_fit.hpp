// paralab — calibration from measured step times alone (`paralab calibrate --from-step-time`):
// a user's own runs, each a scenario and the iteration time its log reports, fit the few
// correction-table rows (ir/correction.hpp) that step times can determine, and say which ones
// they cannot tell apart (docs/calibration.md, "From step times").
//
// Terms, each one row of the table: the compute time factor (every compute op's modeled time
// scaled), the communication time factor, and the host dispatch gap per compute op (us). The
// step time depends on them through the simulation (overlap included), so the fit is
// Gauss-Newton on the simulated step times, residuals relative to the measured ones:
//   r_i = (measured_i - simulated_i(theta)) / measured_i,  J_ij = d r_i / d theta_j (finite
//   differences), theta += argmin |J d - r|  (exact with as many runs as terms; least absolute
//   deviations, by iteratively reweighted least squares, with more).
// A term enters only if its column of J is not within 5 % of the span of the terms already in
// (largest effect first) and there are runs left to determine it; the others are reported.
#pragma once

#include <string>
#include <vector>

#include "ir/correction.hpp"
#include "ir/scenario.hpp"

namespace paralab::calib {

struct StepTimeRun {
  std::string label;
  Scenario scenario;      // loaded, with its topology (every run's the same)
  double measured_s = 0;  // > 0
};

struct StepTimeTerm {
  std::string name;       // "compute", "communication", "dispatch"
  OpClass cls;
  bool factor = true;     // fits the row's factor (else its fixed cost, us)
  double value = 1;       // fitted (or starting) value
  double min_value = 0;   // a communication factor stays >= 1: a call never ends before the network moved its bytes
  std::string why_not;    // empty: fitted; else why the runs do not determine it
  bool at_bound = false;  // fitted, but held at its bound: the runs ask for more than the model allows
};

struct StepTimeFit {
  std::vector<StepTimeTerm> terms;         // every candidate, fitted or not
  std::vector<double> before_s, after_s;   // simulated step per run, without and with the fit
  CorrectionTable table;                   // the base topology's rows with the fitted ones in
  int iterations = 0;
};

// Throws std::invalid_argument for no runs, a non-positive step time, or runs
// on different topologies (naming both).
StepTimeFit fit_step_times(const std::vector<StepTimeRun>& runs);

// The simulated step (s) of `s` with `table` as its corrections.
double simulated_step_s(const Scenario& s, const CorrectionTable& table);

}  // namespace paralab::calib
