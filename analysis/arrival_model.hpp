// paralab — the calibration's arrival model: the wait for a collective's last member as drift
// (CollectiveSpec::sync_drift, spread_drift) or as a constant (sync_skew_us), whichever
// predicts the calibration's own executions of its scenarios better (docs/calibration.md,
// "Drift or constant: the step decides").
//
//   fit_all(r);
//   choose_arrival_model(r, {ir.scenario});  // r refitted without the drift if that predicts better
//
// Why the step decides: the drift is first chosen by which calls it says had a member asleep
// (DriftFit::use), a per-call view. On the 2-vCPU build host it was chosen for quickstart in 7
// of 15 calibrations (passes N24-N38), and each of those predicted the very executions it was
// fitted on 1.3-7.7 % too slow (mean 5.4 %; N31's quickstart then missed the step bar at
// +10.6 %), where the same files with a constant skew of 300 us predicted them 0.0-5.0 % too
// slow (mean 2.4 %), and the 8 calibrations that chose the constant 0.8-4.1 %. Against three
// of N37's reference runs the per-op MAPE was 10.2-20.7 % with the drift, 10.2-21.1 % with the
// constant (bench/results/validate_cpu.md, "forty-ninth session").
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
