// paralab — the calibration's arrival model, drift or constant (semantics in arrival_model.hpp).
#include "analysis/arrival_model.hpp"

#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "analysis/in_sample.hpp"

namespace paralab::calib {

double mean_in_sample_pct(const CalibrationResult& r, const std::vector<Scenario>& executed) {
  const Topology calibrated = calibrated_topology(r);
  double sum = 0;
  int n = 0;
  for (const Scenario& s : executed) {
    Scenario on = s;
    on.topology = calibrated;
    if (const std::optional<InSample> x = in_sample(on)) {
      sum += std::abs(x->pct());
      ++n;
    }
  }
  return n > 0 ? sum / n : std::numeric_limits<double>::quiet_NaN();
}

void choose_arrival_model(CalibrationResult& r, const std::vector<Scenario>& executed) {
  if (!r.drift_used()) return;
  const double with_drift = mean_in_sample_pct(r, executed);
  if (std::isnan(with_drift)) return;
  CalibrationResult constant = r;
  constant.drift_allowed = false;
  fit_all(constant);
  const double with_constant = mean_in_sample_pct(constant, executed);
  if (with_constant < with_drift) r = std::move(constant);
  r.in_sample_drift_pct = with_drift;
  r.in_sample_skew_pct = with_constant;
}

}  // namespace paralab::calib
