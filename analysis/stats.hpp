// paralab — the statistics calibrate and validate share: quantiles, medians, weighted medians,
// percentage errors and how much executions of one step differ from each other. Every op MAPE
// scores ops by one rule (scored_ape).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "ir/step_graph.hpp"

namespace paralab::calib {

// The q-quantile of `v` (0 <= q <= 1), interpolated linearly between neighbours; 0 when empty.
double quantile(std::vector<double> v, double q);
inline double median(std::vector<double> v) { return quantile(std::move(v), 0.5); }
// The upper median of `v` (not empty): a sample that happened (an even count's upper middle).
double upper_median(std::vector<double> v);
// The value m minimizing sum w |v - m| over (value, weight) pairs: the lowest value at which the
// cumulative weight reaches half of the total (Edgeworth 1888). 0 for no pairs or no weight.
double weighted_median(std::vector<std::pair<double, double>> value_weight);

// Ops shorter than this in both results are joined but not scored (timer resolution).
constexpr double kMinScoredUs = 1.0;
// An op's error as every op MAPE scores it, a fraction: |x - ref| / ref, or nothing when both are
// shorter than kMinScoredUs or ref is not positive.
inline std::optional<double> scored_ape(double x_us, double ref_us) {
  if (std::max(x_us, ref_us) < kMinScoredUs || ref_us <= 0) return std::nullopt;
  return (x_us > ref_us ? x_us - ref_us : ref_us - x_us) / ref_us;
}

// Per op ((rank, op) -> one duration per execution, in order), communication timed from its last
// arrival.
using RunDurations = std::map<std::pair<int64_t, OpId>, std::vector<double>>;
// Mean over ordered pairs of executions (a, b) of the MAPE of a's op durations against b's (%):
// how far one execution is from another, the floor under any model's op MAPE against one of
// them. 0 with fewer than 2 executions.
double run_to_run_mape_pct(const RunDurations& durations, int runs);
// The MAPE of the executions' per-op medians against each execution, averaged (%): how far one
// execution is from the reference validate compares with.
double reference_spread_pct(const RunDurations& durations, int runs);

}  // namespace paralab::calib
