// paralab — what a real execution of a scenario tells the calibration that a replay cannot
// (docs/calibration.md, "In-situ execution"): the executor's host-side costs between ops and
// communication as the step meets it.
//
//   calib::InSituSamples s;
//   calib::collect_in_situ(ir, measured, "execution quickstart", s);   // a measured StepResult
//   double h = calib::trimmed_mean(s.handoff_us, 0.005);   // fit_all does this
//
// From every rank's measured op intervals (the executor's own clock, before any alignment):
//   - dispatch: a compute-stream op whose last constraint to end was its predecessor on the
//     stream starts this long after it (the worker thread's bookkeeping between ops; on a
//     communication stream the same gap also holds the poller's sleep, which the per-call
//     communication time below already has);
//   - hand-off: an op whose last constraint to end was a dependency on another stream starts
//     this long after it (the waiting stream's worker is woken by a condition variable);
//   - communication: each call timed from its last participant's arrival (align_comm_starts),
//     with its pattern, group and bytes, to set the per-call overhead the alpha-beta fit of the
//     barrier-synchronized sweep does not see (a peer's poller asleep, threads sharing cores);
//     a transfer by its receive, since its send ends only when the sender sees the receiver's
//     acknowledgement; each with how long its rank had waited for the last participant (a
//     call that ends after its poller stopped spinning is seen late: CollectiveSpec::wake_us);
//   - acknowledgement: per transfer, its send's end minus its receive's end (0 if earlier);
//   - arrival skew: per member of a collective or ring shift within a stage (tp, cp, dp), how long after its
//     own arrival the last member arrived (the wait the simulator's identical ranks do not
//     have; stages reaching a collective at different times is the pipeline, simulated);
//   - compute: every compute op's duration under its key, as the real step runs it (beside the
//     rank's communication threads and the other ranks).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "analysis/fit.hpp"
#include "analysis/measure.hpp"
#include "ir/step_ir.hpp"
#include "results/step_result.hpp"

namespace paralab::calib {

struct InSituSamples {
  int executions = 0;              // measured steps collected
  std::vector<double> dispatch_us; // same-stream gaps on the compute stream
  std::vector<double> handoff_us;  // cross-stream gaps
  std::vector<CommSample> comm;    // calls from the last arrival; weight 1 each
  std::vector<double> skew_us;     // per member of a collective: last member's arrival - its own
  std::vector<double> ack_us;      // per transfer: its send's end - its receive's end (>= 0)
  std::map<OpKey, OpSamples> compute;
};

// Appends the samples of one measured step of `ir` (every rank's ops: execute's gathered
// result on rank 0). `origin` labels the compute samples ("execution <scenario>"). Ops of
// ranks or ids the IR does not have are an InternalError (a result of another scenario).
void collect_in_situ(const StepIR& ir, const StepResult& measured, const std::string& origin, InSituSamples& out);

// Mean of `v` without the lowest and highest `trim` fraction (0 for an empty vector): the gaps
// have a long tail of preemptions on a shared host, which does cost step time (so not the
// median), but one 20 ms descheduling should not set a 10 us parameter.
double trimmed_mean(std::vector<double> v, double trim);

// The pattern calibrate times a collective kind with.
CommPattern pattern_of(CollKind k);

}  // namespace paralab::calib
