// paralab — how much executions of one step differ from each other (analysis/; validate's
// `noise` and `reference` lines, docs/calibration.md "validate"). Durations are per op
// ((rank, op) -> one duration per run, in run order), communication aligned as compare
// scores it; ops shorter than kMinScoredUs in both are not scored (compare's rule).
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "ir/step_graph.hpp"

namespace paralab::calib {

using RunDurations = std::map<std::pair<int64_t, OpId>, std::vector<double>>;

// Mean over ordered pairs of runs (a, b) of the MAPE of run a's op durations against run b's
// (%): how noisy a reference one execution is. 0 with fewer than 2 runs.
double run_to_run_mape_pct(const RunDurations& durations, int runs);

// How well the per-op median over the runs reproduces itself (%): the even- and the
// odd-numbered runs (interleaved in time, so a drift of the machine lands in both) each give
// every op a median (the upper one, as validate's reference takes), scored against each other,
// averaged over both directions. A model's op MAPE below this is within what a second
// reference would disagree by. validate's reference is the median over all the runs, steadier
// than either half's, so this bounds its noise from above. 0 with fewer than kMinSplitRuns runs (a half
// of one run is one execution, which run_to_run_mape_pct already reports).
constexpr int kMinSplitRuns = 4;
double split_half_mape_pct(const RunDurations& durations, int runs);

// The upper median of `v` (not empty): the rule validate's reference takes. Takes a copy, so
// a caller's durations stay in run order for the figures above.
double upper_median(std::vector<double> v);

}  // namespace paralab::calib
