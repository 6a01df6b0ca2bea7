// paralab — a calibration held to its own executions of a scenario (semantics in in_sample.hpp).
#include "analysis/in_sample.hpp"

#include <cmath>
#include <cstdio>

#include "ir/step_ir.hpp"
#include "results/step_result.hpp"
#include "sim/simulate.hpp"

namespace paralab::calib {

bool InSample::at_odds() const { return executions.step_fast_s > 0 && std::abs(pct()) > kInSampleBoundPct; }

const ExecutionPoint* own_executions(const Scenario& calibrated) {
  const std::string digest = scenario_digest(calibrated);
  for (const ExecutionPoint& e : calibrated.topology.calibration.executions)
    if (e.digest == digest && e.step_fast_s > 0) return &e;
  return nullptr;
}

std::optional<InSample> in_sample(const Scenario& calibrated) {
  const ExecutionPoint* e = own_executions(calibrated);
  if (!e) return std::nullopt;
  return InSample{*e, sim::simulate(build_step_ir(calibrated)).result.step_time_s};
}

std::string in_sample_warning(const InSample& s) {
  if (!s.at_odds()) return "";
  const ExecutionPoint& e = s.executions;
  char buf[640];
  std::snprintf(buf, sizeof buf,
                "warning: the prediction (%.4g s per step) is %+.1f%% from the calibration's own executions of this "
                "scenario (%.4g s, their fastest half's median; %lld executions, %.4g .. %.4g s, median %.4g s), "
                "beyond %.0f%%: the calibration's per-op figures and its steps disagree, as when the host stalled its "
                "executions now and then, and the step error is no check of the model (calibrate again on a quiet "
                "machine: --recalibrate)",
                s.predicted_step_s, s.pct(), e.step_fast_s, static_cast<long long>(e.executions), e.step_min_s,
                e.step_max_s, e.step_median_s, kInSampleBoundPct);
  return buf;
}

bool calibrate_again(const std::optional<InSample>& best, int attempts, int max_attempts) {
  return attempts < max_attempts && best && best->at_odds();
}

}  // namespace paralab::calib
