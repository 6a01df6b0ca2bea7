// paralab — the host's communication speed in validate's executions: whether a class of
// communication ran at two speeds across the launches, and whether its calls ran at the speed
// the calibration's executions met (validate's "two speeds" and "calls since calibrating"
// warnings, docs/calibration.md "validate"). On the project's 2-vCPU VM the path between the
// two cores has two speeds, switched by the hypervisor for seconds at a time (a 512 KiB copy in
// 11.3 or 23.8 us, bench/host/cross_core.cpp), and quickstart's forward 1 MB all-gathers took a
// median 60-86 us in 20 of 32 launches and 243-263 us in 9 (bench/results/validate_cpu.md,
// "forty-third session"). A reference and a calibration that met different mixes of the two
// disagree per call by up to 3.5x; no model of the step can say which a later run meets. These
// find it in validate's executions, so that the verdict says so.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analysis/run_noise.hpp"
#include "ir/topology.hpp"
#include "results/result_io.hpp"

namespace paralab::calib {

// A class of communication op whose launches split into a fast and a slow group.
struct CommSpeeds {
  std::string cls;              // compare's op class and the phase: "all_gather tp, fwd"
  int64_t ops = 0;              // ops of the class (ranks x calls) in one run
  int fast_launches = 0, slow_launches = 0;
  double fast_us = 0, slow_us = 0;  // the median of each group's launch medians
  [[nodiscard]] double ratio() const { return fast_us > 0 ? slow_us / fast_us : 0.0; }
};

// A class needs this many ops per run, and launches, to tell two speeds from noise. Its launch
// medians, sorted, split at their widest gap (as a ratio), which must be at least kMinGapRatio
// (nothing between the speeds: 15 launches spread evenly from 60 to 260 us have no gap wider
// than 1.23); each group holds at least kMinLaunchesPerSpeed launches (one slow launch is an
// outlier, which the fastest half already leaves out); and the slow group's median is at least
// kTwoSpeedsRatio x the fast group's. The 32 launches above: widest gap 85 -> 123 us (1.44),
// 20 launches at a median 65 us, 12 at 245.
constexpr int64_t kMinOpsPerClass = 10;
constexpr int kMinLaunchesForSpeeds = 4;
constexpr int kMinLaunchesPerSpeed = 2;
constexpr double kMinGapRatio = 1.3;
constexpr double kTwoSpeedsRatio = 2.0;

// `durations`: (rank, op) -> its duration in each run (run order, communication aligned);
// `class_of`: the communication ops' class (others absent: not considered); `launch_of`: each
// run's launch. Per class, each launch's median over its runs' durations of the class's ops
// (a launch's runs share its pace); the classes whose launches split as above, the largest
// ratio first. Empty with fewer than kMinLaunchesForSpeeds launches. Throws
// std::invalid_argument when `launch_of` does not give one launch per run.
std::vector<CommSpeeds> comm_two_speeds(const RunDurations& durations,
                                        const std::map<std::pair<int64_t, OpId>, std::string>& class_of,
                                        const std::vector<int>& launch_of);

// The class of each communication op of a trace (collectives, sends, receives): compare's op
// class and its phase, keyed as RunDurations are. Empty for a result without per-op timings.
std::map<std::pair<int64_t, OpId>, std::string> comm_classes(const LoadedResult& r);

// validate's warning line for one such class ("warning: ...").
std::string two_speeds_warning(const CommSpeeds& s);

// A class of collective as the calibration's executions ran it ([[calibration.call]]'s
// executed_us) and as validate's reference did: the median over the class's ops of their
// compared durations (each op's median over the centred fast half). The same statistic on both
// sides, measurement against measurement: a ratio far from 1 is the host's communication
// changing speed between calibrating and measuring, which the step time (host drift) hides when
// the calls are a small part of it (N10 of the forty-third session: quickstart's step +2.7 %
// from its calibration's executions, its forward all-gathers several times slower).
struct CallsSinceCalibration {
  std::string cls;  // as comm_classes names it: "all_gather tp, fwd"
  int64_t ops = 0;  // the reference's ops of the class
  double calibrated_us = 0, measured_us = 0;
  [[nodiscard]] double ratio() const { return calibrated_us > 0 ? measured_us / calibrated_us : 0.0; }
  // Beyond kCallDriftWarnRatio either way: validate warns.
  [[nodiscard]] bool drifted() const;
};
constexpr double kCallDriftWarnRatio = 2.0;

// Every class of `calls` with executed_us > 0 and ops in `reference` (a trace with per-op
// timings), in the calibration's order.
std::vector<CallsSinceCalibration> calls_since_calibration(const LoadedResult& reference,
                                                           const std::vector<CallPoint>& calls);

// validate's warning line for one class beyond kCallDriftWarnRatio ("warning: ...").
std::string call_drift_warning(const CallsSinceCalibration& c);

// validate's table lines for both ("calls" and "speeds", items wrapped under a 12-column
// label); empty when there is neither.
std::string comm_speed_table(const std::vector<CallsSinceCalibration>& calls, const std::vector<CommSpeeds>& speeds);

}  // namespace paralab::calib
