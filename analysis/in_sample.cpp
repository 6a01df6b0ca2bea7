// paralab — a calibration held to its own executions of a scenario (semantics in in_sample.hpp).
#include "analysis/in_sample.hpp"

#include <cmath>
#include <cstdio>

#include "ir/scenario_loader.hpp"
#include "ir/step_ir.hpp"
#include "results/step_result.hpp"
#include "sim/simulate.hpp"

namespace paralab::calib {

bool InSample::at_odds(double bound_pct) const { return executions.step_fast_s > 0 && std::abs(pct()) > bound_pct; }

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

std::optional<InSample> in_sample(const std::filesystem::path& scenario, const std::vector<std::string>& sets,
                                  const std::filesystem::path& calibration) {
  std::vector<std::string> on = sets;
  on.push_back("cluster.topology=" + std::filesystem::absolute(calibration).string());
  return in_sample(load_scenario(scenario, on));
}

std::string in_sample_warning(const InSample& s, double bound_pct) {
  if (!s.at_odds(bound_pct)) return "";
  const ExecutionPoint& e = s.executions;
  char buf[640];
  std::snprintf(buf, sizeof buf,
                "warning: the prediction (%.4g s per step) is %+.1f%% from the calibration's own executions of this "
                "scenario (%.4g s, their fastest half's median; %lld executions, %.4g .. %.4g s, median %.4g s), "
                "beyond %.3g%%: the calibration's per-op figures and its steps disagree, as when the host stalled its "
                "executions now and then, and the step error is no check of the model (calibrate again on a quiet "
                "machine: --recalibrate, or a new --calibration file)",
                s.predicted_step_s, s.pct(), e.step_fast_s, static_cast<long long>(e.executions), e.step_min_s,
                e.step_max_s, e.step_median_s, bound_pct);
  return buf;
}

bool calibrate_again(const std::optional<InSample>& best, int attempts, int max_attempts, double bound_pct) {
  return attempts < max_attempts && best && best->at_odds(bound_pct);
}

}  // namespace paralab::calib
