// paralab — a calibration held to its own executions of a scenario (validate's in-sample
// check; docs/calibration.md, "A calibration at odds with itself"): the scenario simulated on
// the calibrated topology, against the median step of the fastest half of the executions the
// calibration took its in-situ figures from. No measurement made after calibrating enters it,
// so validate may act on it (make the calibration again) before executing its reference.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ir/scenario.hpp"
#include "ir/topology.hpp"

namespace paralab::calib {

// |pct()| beyond this (validate's default; --in-sample-bound): the prediction misses the very executions it was calibrated on, and a
// step error against a later reference is no check of the model. The in-situ figures are each
// op's median over the executions' centred fast half; when the host stalled those executions now and
// then, a stall lands on different ops in different steps, and the per-op medians stay nearer
// the quiet pace than the half's median step does. On the 2-vCPU build VM, of the 40 rows of
// passes N8-N12, 39 were within 6.1 % of their executions (38 within 2.8 %), one at -10.2 %
// (N11's cpu-tp2, its steps 18.9-46.4 ms); four calibrations of cpu-tp2 under an intermittent
// load (2-15 ms busy, 5-40 ms idle, on both cores) at -23.3 to -26.8 %, with the median step
// only 1.13-1.17x the fastest half's, so the executions' spread alone does not tell
// (bench/results/validate_cpu.md, "forty-fourth session").
inline constexpr double kInSampleBoundPct = 10.0;

struct InSample {
  ExecutionPoint executions;    // the calibration's [[calibration.execution]] of this scenario
  double predicted_step_s = 0;  // the scenario simulated on the calibrated topology
  // (predicted - executed) / executed, % of the executions' fastest half's median step.
  [[nodiscard]] double pct() const { return 100.0 * (predicted_step_s / executions.step_fast_s - 1.0); }
  // |pct()| beyond bound_pct (and the executions timed a step).
  [[nodiscard]] bool at_odds(double bound_pct = kInSampleBoundPct) const;
};

// The calibration's executions of `calibrated` (a scenario loaded on the calibrated topology):
// its first [[calibration.execution]] with the scenario's digest and a timed step, or nullptr
// when it executed only others (or nothing). Two entries of one digest are executions of the
// same IR under two names (calibrate writes one per scenario name): either describes it.
const ExecutionPoint* own_executions(const Scenario& calibrated);

// `calibrated` simulated and held to own_executions(calibrated); nullopt without them.
std::optional<InSample> in_sample(const Scenario& calibrated);
// The same for the scenario file loaded with `sets` and cluster.topology set to `calibration`.
std::optional<InSample> in_sample(const std::filesystem::path& scenario, const std::vector<std::string>& sets,
                                  const std::filesystem::path& calibration);

// The warning for an InSample at odds beyond bound_pct (naming the prediction, its distance,
// the executions' steps and what to do); "" when it is not.
std::string in_sample_warning(const InSample& s, double bound_pct = kInSampleBoundPct);

// validate's rule for making its calibration again: having made `attempts` of at most
// `max_attempts`, another when the best so far (the least at odds) executed the scenario and
// is at odds beyond bound_pct.
bool calibrate_again(const std::optional<InSample>& best, int attempts, int max_attempts,
                     double bound_pct = kInSampleBoundPct);

}  // namespace paralab::calib
