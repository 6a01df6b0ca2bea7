// paralab — what executions of a scenario say the model misses, op by op (docs/calibration.md,
// "Corrections"): every (rank, op) of the executed step against the simulation of the same step
// on the calibrated hardware without corrections.
//
//   calib::CorrectionSamples s = calib::correction_samples(ir, executed_runs, uncorrected);
//   CorrectionTable t = calib::fit_corrections(s);   // corrections.hpp
//
// For each op of each measured rank, its median over the executions of
//   - its own time: a compute op from its start, a call from its last member's arrival
//     (align_comm_starts), against the modeled time the correction multiplies (the compute
//     model's duration; the simulated call's time);
//   - the gap before it: its start (a call: its post) minus the end of its last constraint,
//     a dispatch gap when that was its stream predecessor, a hand-off when a dependency on
//     another stream ended later; against the same gap in the simulation.
#pragma once

#include <vector>

#include "ir/correction.hpp"
#include "ir/step_ir.hpp"
#include "results/step_result.hpp"

namespace paralab::calib {

struct CorrectionSample {
  CostKind cost = CostKind::time;
  OpFacts facts;
  double modeled_us = 0;
  double measured_us = 0;
};

struct CorrectionSamples {
  std::vector<CorrectionSample> samples;
  void append(const CorrectionSamples& o) { samples.insert(samples.end(), o.samples.begin(), o.samples.end()); }
};

// `runs`: measured steps of `ir` (every rank's ops); `simulated`: the simulation of `ir` on the
// calibrated hardware with no correction table (one representative per stage); `modeled_us`:
// per stage, the compute model's duration of each op (sim::ComputeModel::durations). Ops of
// ranks or ids the IR does not have are an InternalError (a result of another scenario).
CorrectionSamples correction_samples(const StepIR& ir, const std::vector<StepResult>& runs, const StepResult& simulated,
                                     const std::vector<std::vector<double>>& modeled_us);

}  // namespace paralab::calib
