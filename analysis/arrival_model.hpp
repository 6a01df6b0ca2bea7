// paralab — the calibration's arrival model: the wait for a collective's last member as drift
// (CollectiveSpec::sync_drift, spread_drift) or as a constant (sync_skew_us), whichever
// predicts the calibration's own executions of its scenarios better (docs/calibration.md,
// "Drift or constant: the step decides").
//
//   fit_all(r);
//   choose_arrival_model(r, {ir.scenario});  // r refitted without the drift if that predicts better
//
// Why the step decides: the drift is first chosen by which calls it says had a member asleep
// (DriftFit::use), a per-call view, and the step is what validate scores. On the 2-vCPU build
// host the classification chose the drift for quickstart in 7 of 15 calibrations (passes
// N24-N38: by 74-83 % of the members right against 50-71 %), each of which then predicted
// the executions it was fitted on 1.3-7.7 % too slow (mean 5.4 %; N31's quickstart missed the
// step bar at +10.6 %). Whether the constant would have done better was not in those files;
// here it is asked of every calibration that chose the drift. In the first three so made (q1,
// N40, N41) the two tied: 2.2 against 2.2 %, 4.20 against 4.23 %, 1.01 against 1.03 %
// (bench/results/validate_cpu.md, "forty-ninth session").
#pragma once

#include <vector>

#include "analysis/calibrate.hpp"
#include "ir/scenario.hpp"

namespace paralab::calib {

// The mean |in-sample error| (%, in_sample.hpp) of those of `executed` (scenarios as loaded, on
// any topology) that `r`'s calibrated topology has executions of; NaN when it has none.
double mean_in_sample_pct(const CalibrationResult& r, const std::vector<Scenario>& executed);

// When `r` (fitted by fit_all) uses the drift and has executions of some of `executed`: fits
// a copy again without the drift (drift_allowed false: the constant skew, and the calls' sleep
// and per-call costs as that classifies them), and keeps the copy when its mean |in-sample
// error| is smaller; ties keep the drift. Both errors go to r.in_sample_drift_pct and
// r.in_sample_skew_pct. Otherwise leaves `r` as it is.
void choose_arrival_model(CalibrationResult& r, const std::vector<Scenario>& executed);

}  // namespace paralab::calib
