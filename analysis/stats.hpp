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
// averaged over both directions. With `launch_of` (each run's launch, when a launch measured
// several steps) the halves are the even- and the odd-numbered launches: a launch's pace is
// shared by its steps, so halves split inside launches would agree by that much more than two
// references would. A model's op MAPE below this is within what a second
// reference would disagree by. validate's reference is the median over all the runs, steadier
// than either half's, so this bounds its noise from above. 0 with fewer than kMinSplitRuns runs
// (a half of one run is one execution, which run_to_run_mape_pct already reports) or with all
// of them in one launch. Throws std::invalid_argument when `launch_of` is given and is not one
// per run.
constexpr int kMinSplitRuns = 4;
double split_half_mape_pct(const RunDurations& durations, int runs, const std::vector<int>& launch_of = {});

// The fastest half of a scenario's executions: the indices of the ceil(n / 2) runs with the
// shortest steps, fastest first (ties: the earlier run). A shared host's other tenants only
// add time, in phases of seconds to minutes, so the fast half is the machine's own pace: on the
// 2-core build machine, over 56 validate rows, the median step of the reference runs moved from
// that of their calibration's executions by RMS 10.1 % (13 beyond 10 %), the fastest step by
// RMS 6.0 % (4 beyond 10 %) (bench/results/validate_cpu.md, "thirty-first session"). Its
// median, not its fastest, is what calibrate and validate take: with 4 ranks on 2 cores the
// single fastest run is a lucky schedule (cpu-tp2-dp2-zero3: 19-27 % below its calibration's).
// Robust benchmarking under one-sided noise: J. Chen and J. Revels, "Robust benchmarking in
// noisy environments", arXiv:1608.04295 (2016).
std::vector<int> fastest_half(const std::vector<double>& step_s);

// The median step of the fastest half (its lower middle: a run that happened; 0 for none).
double fast_half_step_s(const std::vector<double>& step_s);

// The executions whose figures stand for the fast half's median step: its fastest 2m + 1,
// m = (ceil(n / 2) - 1) / 2, so that their middle one is the run fast_half_step_s names (an
// odd half whole, an even half without its slowest), fastest first. The calibration's in-situ
// figures and validate's per-op reference come from these. Taken from the whole even half, a
// slow phase's run weighed in on a step it was no part of: with quickstart's 4 executions
// the half is 2, its median the fastest, and over N24-N41 the second was often a slow-phase
// run that waited 5-7x longer at its calls (bench/results/validate_cpu.md, "fiftieth session").
std::vector<int> centred_fast_half(const std::vector<double>& step_s);

// The upper median of `v` (not empty): the rule validate's reference takes. Takes a copy, so
// a caller's durations stay in run order for the figures above.
double upper_median(std::vector<double> v);

}  // namespace paralab::calib
