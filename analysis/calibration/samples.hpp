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
//     by how many of the node's ranks were computing as it began (compute_activity.hpp);
//   - hand-off: an op whose last constraint to end was a dependency on another stream starts
//     this long after it (the waiting stream's worker is woken by a condition variable);
//   - communication: each call timed from its last participant's arrival (align_comm_starts),
//     with its pattern, group and bytes, to set the per-call overhead the alpha-beta fit of the
//     barrier-synchronized sweep does not see (a peer's poller asleep, threads sharing cores);
//     a transfer by its receive, since its send ends only when the sender sees the receiver's
//     acknowledgement; each with how long its rank had waited for the last participant (a
//     call that ends after its poller stopped spinning is seen late: CollectiveSpec::wake_us);
//   - acknowledgement: per transfer, its send's end minus its receive's end (0 if earlier), and
//     how long its sender had been posted by its receive's end;
//   - arrival skew: per member of a collective or ring shift within a stage (tp, cp, dp), how long after its
//     own arrival the last member arrived (the wait the simulator's identical ranks do not
//     have; stages reaching a collective at different times is the pipeline, simulated), and
//     how long before its arrival the rank's compute stream last waited for a call (the ranks
//     resume together there and drift apart: CollectiveSpec::sync_drift);
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

// A member's arrival at a collective or ring shift within its stage (us, its rank's clock).
struct Arrival {
  double wait_us = 0;    // the last member's arrival - its own
  double since_us = 0;   // its own arrival - the last time its rank's compute waited for a call
  double spread_us = 0;  // the call's last arrival - its first (the earliest member's wait)
  double time_us = 0;    // its call's time from the last arrival (0: unknown, weighs 1 us)
  int execution = 0;     // the measured step it came from (InSituSamples::executions then)
};

// The arrival skew as drift (CollectiveSpec::sync_drift), and which calls it says had a member
// asleep (spread beyond the spin window): the members' spread per us since compute last waited
// (CollectiveSpec::spread_drift) whose threshold classifies them best, against "none asleep"
// (what a constant skew says). Members weigh 1 / their call's time: a call put to sleep wrongly,
// or left awake wrongly, is off by the wake time either way, and the per-op comparison scores
// that relative to the call's measured time (a 150 us call predicted 200 us late is off by
// 130 %, a 350 us call predicted 200 us early by 57 %). The spread is fitted, not twice the
// rate: the rate is a ratio of summed waits that the few long ones set (quickstart: 0.063, so
// twice that slept every call 4 ms after a wait), while on the members' own evidence calls
// slept from about 30 ms (bench/results/validate_cpu.md, twenty-third session).
struct DriftFit {
  double rate = 0;           // sum of waits / sum of times since (0: none)
  double right = 0;          // weighted fraction classified right by spread x since > spin
  double right_awake = 0;    // weighted fraction of members whose call had no sleeper
  double spread = 0;         // the best threshold's spread per us since (0: none beats "none asleep")
  double right_twice = 0;    // weighted fraction classified right by 2 x rate x since > spin
  // Used when it classifies at least kMargin more of the (weighted) members right: on cpu-tp2
  // (almost no call has a sleeper) both round to 100 %, no reason to move every wait.
  static constexpr double kMargin = 0.05;
  [[nodiscard]] bool use() const { return rate > 0 && spread > 0 && right >= right_awake + kMargin; }
};

struct InSituSamples {
  int executions = 0;              // measured steps collected
  std::vector<double> dispatch_us; // same-stream gaps on the compute stream (net of turns)
  // The same gaps by how many ranks of the node were computing as the gap began
  // (ComputeActivity::busy_ranks): where the node's ranks take turns on its cores, the turn's
  // round grows with them (Calibration::dispatch).
  std::map<int64_t, std::vector<double>> dispatch_by_busy_us;
  std::vector<double> handoff_us;  // cross-stream gaps before a communication op
  std::vector<double> compute_handoff_us;  // cross-stream gaps before a compute op (net of turns)
  double turns = 1.0;              // the most core-pool turns those gaps were netted of (collect_in_situ)
  std::vector<CommSample> comm;    // calls from the last arrival; weight 1 each
  std::vector<Arrival> arrivals;   // per member of a collective or ring shift within a stage
  // Per transfer: its send's end - its receive's end (>= 0), and how long the sender had been
  // posted when the data arrived (its receive's end - its send's own post): beyond the poller's
  // spin window the sender slept, and the simulator adds wake_us to its end on top.
  struct Ack {
    double ack_us = 0;
    double sender_wait_us = 0;
  };
  std::vector<Ack> acks;
  std::map<OpKey, OpSamples> compute;
  // Per execution (one measured step, every rank), per key: its compute ops' summed time (us)
  // and count. What a whole step's compute took against its keys' medians (compute_tail).
  struct KeySum {
    double us = 0;
    int64_t n = 0;
  };
  std::vector<std::map<OpKey, KeySum>> compute_by_execution;
  // Per executed scenario (by name), its digest and measured steps' times (s): what the
  // calibrated prediction of that scenario should reproduce, and what `validate` holds its own
  // executions against (the machine's drift since calibrating: [[calibration.execution]]).
  struct Steps {
    std::string digest;
    std::vector<double> s;
    int launches = 1;  // of the calibration job the executions spread over (in_situ_run.hpp)
  };
  std::map<std::string, Steps> step_s;
};

// Appends the samples of one measured step of `ir` (every rank's ops: execute's gathered
// result on rank 0). `origin` labels the compute samples ("execution <scenario>"). Ops of
// ranks or ids the IR does not have are an InternalError (a result of another scenario).
// `turns`: how many turns a stage's ranks take on the node's cores in the simulator's pool
// (sim::CoreShare::turns_of; 1 when each rank has a core of its own). The executed gap before
// a compute op holds the executor's wait for a core turn; the pool adds (turns - 1) x the
// op's time before each op itself, so the dispatch and compute hand-off samples are net of it
// (and may be negative: a rank that found a core free). On cpu-tp2-dp2-zero3 (4 ranks, one
// stage, 2 cores: 2 turns) the gaps after a compute op averaged 60 us in the reference runs
// of one pass, while the simulator put 57 us (their calibration's median) plus 27 us of turns
// before each: 235 such gaps a step made the prediction 5-14 % longer than its calibration's
// own executions (bench/results/validate_cpu.md, "thirty-second session").
void collect_in_situ(const StepIR& ir, const StepResult& measured, const std::string& origin, InSituSamples& out,
                     double turns = 1.0);

// The fraction trimmed from each side of the in-situ means (trimmed_mean): a single descheduling
// of milliseconds during the calibration's few steps does not set a 10 us parameter.
inline constexpr double kInSituTrim = 0.005;

// Mean of `v` without the lowest and highest `trim` fraction (0 for an empty vector): the gaps
// have a long tail of preemptions on a shared host, which does cost step time (so not the
// median), but one 20 ms descheduling should not set a 10 us parameter.
double trimmed_mean(std::vector<double> v, double trim);

// The arrival skew's drift: sum of waits over sum of times since (a ratio of sums, so that the
// simulator's waits add up to the measured ones), without the members of the highest `trim`
// fraction of waits (a descheduling); and the spread per us since whose threshold (asleep:
// spread x since_us > spin_us) classifies the members' calls best as having a sleeper
// (spread_us > spin_us), with how well it and twice the rate do. spin_us 0 (no sleeping
// pollers): every right fraction is 1, so the drift is not used.
DriftFit fit_drift(const std::vector<Arrival>& arrivals, double spin_us, double trim);

// Each member's wait for its call's last member (Arrival::wait_us), in order.
std::vector<double> arrival_waits(const std::vector<Arrival>& arrivals);

// The arrival skew of the median execution: per execution (Arrival::execution), the trimmed
// mean of its members' waits; the median of those (0 without arrivals). `executions` gets how
// many there were. validate compares one run (its fastest half's median-step run), and a
// step's waits move with its host: cpu-tp2's 15 runs of one pass averaged 0.8-5.7 us per
// member, their median-step run 2 us, while the pooled mean of its calibration's 12
// executions was 8.7 us, set by the slow ones, and put the prediction 12.4 % over those
// executions' median step (bench/results/validate_cpu.md, "thirty-first session").
double median_execution_wait(const std::vector<Arrival>& arrivals, double trim, size_t* executions = nullptr);

// The acknowledgements CollectiveSpec::p2p_ack_us is the mean of: those of transfers whose
// sender had waited at most `spin_us` when the data arrived (its poller still spun; a sleeping
// one adds wake_us in the simulator), or all of them when fewer than `min_awake` did (and with
// spin_us 0: no poller sleeps). On cpu-pp4 (1,680 transfers) the sends whose rank had waited
// over 0.5 ms ended a median 114 us after their receive, the others 19 us and -10 us
// (bench/results/validate_cpu.md, "thirty-first session").
std::vector<double> awake_acks(const std::vector<InSituSamples::Ack>& acks, double spin_us, size_t min_awake);

// The pattern calibrate times a collective kind with.
CommPattern pattern_of(CollKind k);

}  // namespace paralab::calib
