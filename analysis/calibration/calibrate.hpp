// paralab — `paralab calibrate`: measure this machine with the executor's own code paths, fit
// the simulator's parameters, write a topology the simulator accepts as it is
// (docs/calibration.md).
//
//   exec::Transport& world = ...;                 // every rank of the calibration job
//   calib::CalibrationResult r = calib::run_calibration(world, options);   // collective
//   if (world.rank() == 0) write(calib::topology_toml(r));
//
// What is measured, by every rank of the job at once (so each rank sees the contention of the
// real run: the same number of busy ranks on the host's cores):
//   1. the compute ops of the given scenarios, each rank replaying the scenario rank it stands
//      for (measure.hpp: Replayer), every distinct (GEMM shape, math) and (kernel kind, bytes);
//   2. a sweep of small one-layer models (GEMM shapes and kernel sizes around and beyond the
//      scenarios', fp32 and bf16) for the fits;
//   3. collectives and ring transfers over sizes on groups of 2 and of all ranks;
//   4. the streaming memory bandwidth each rank gets (a large copy);
//   5. in situ: each scenario of the job's size executed for real (in_situ.hpp): its compute
//      ops as the step runs them (instead of 1.), the executor's dispatch and cross-stream
//      hand-off gaps, and its communication calls timed from their last participant's arrival.
// Rank 0 pools every rank's samples (medians), fits (fit.hpp) and builds the topology.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/fit.hpp"
#include "analysis/host_info.hpp"
#include "analysis/in_situ.hpp"
#include "analysis/measure.hpp"
#include "exec/comm.hpp"
#include "ir/topology.hpp"

namespace paralab::calib {

struct CalibrateOptions {
  std::string backend = "cpu";
  std::vector<std::filesystem::path> scenarios;  // measure exactly their ops
  std::vector<std::string> sets;                 // --set overrides applied to every scenario
  std::filesystem::path base_topology;           // default: the first scenario's, else cpu-host
  int reps = 5;                                  // timed passes per job (after one warm-up pass)
  bool sweep = true;                             // the shape sweep for the fits
  bool comm = true;                              // collectives and transfers
  bool quick = false;                            // a smaller sweep and fewer sizes (tests)
  bool in_situ = true;                           // execute the scenarios of the job's size (5.)
  // The launches 5.'s executions spread over (in_situ_run.hpp), this job included: the others
  // ran before it and left their traces under `in_situ_from`. One launch draws one pace.
  int in_situ_launches = 1;
  std::filesystem::path in_situ_from;            // earlier launches' traces (empty: none)
  // Called on rank 0 with the fraction done and what is being measured.
  std::function<void(double, const std::string&)> progress;
};


struct CalibrationResult {
  std::string backend;
  int ranks = 1;                         // processes in the calibration job (busy at once)
  int reps = 0;
  std::vector<std::string> scenarios;    // names of the scenarios measured exactly
  std::string started_utc;
  double wall_s = 0;
  HostInfo host;
  // The device measured where it is not the host (a GPU): rank 0's. The calibrated topology
  // describes it (calibration_topology.cpp), whatever device the base topology names.
  std::optional<exec::DeviceIdentity> gpu;
  std::string paralab_version;

  // More ranks than the host's cores (CPU backend): replayed compute ops were timed by thread CPU
  // time, executed ones by their execution under core turns (the simulator shares the node's
  // cores among the ranks itself: NodeSpec::cores; no compute_tail, its core pool has the waits).
  bool compute_cpu_time = false;
  std::vector<OpSamples> compute;        // pooled over ranks; one per key
  std::vector<CommPoint> comm;           // pooled over members
  double copy_gbps = 0;                  // streaming copy bandwidth per rank (median over ranks)

  std::map<MathMode, GemmFit> gemm;      // per math mode measured
  StreamFit stream;                      // all memory-bound kernels together
  std::map<std::string, StreamFit> stream_by_kind;
  bool have_comm_fit = false;
  AlphaBetaFit comm_fit;
  double flash_fwd_efficiency = 0, flash_bwd_efficiency = 0;  // 0: not measured

  InSituSamples in_situ;                 // 5. (compute samples already moved into `compute`)
  // Fitted from in_situ (0 and false: not measured): the executor's gaps (trimmed means) and
  // the per-call communication time the barrier-synchronized sweep does not see (weighted
  // median of measured minus comm_fit over the executed calls, with the bytes' slow-down
  // below), added to comm_fit.launch_us.
  double dispatch_us = 0, stream_handoff_us = 0, compute_handoff_us = 0, sync_skew_us = 0, p2p_ack_us = 0;
  double handoff_on_core_us = 0;  // the median communication hand-off, at most its mean
  // Calibration::dispatch: where the host's ranks outnumber its cores, the dispatch gap's
  // trimmed mean (net of turns, at least 0) per number of the node's ranks computing, for
  // each such number with at least kMinDispatchGaps gaps; empty unless two numbers have them
  // (one stage, or ranks with cores of their own: dispatch_us says it all).
  std::vector<DispatchPoint> dispatch_by_busy;
  static constexpr size_t kMinDispatchGaps = 30;
  size_t sync_skew_executions = 0;  // sync_skew_us: the median over this many executions' mean waits
  // p2p_ack_us is the mean over the transfers whose sender's poller still spun when at least
  // this many did (in_situ.hpp, awake_acks).
  static constexpr size_t kMinAwakeAcks = 20;
  // The arrival skew as drift (CollectiveSpec::sync_drift and spread_drift, in_situ.hpp's
  // fit_drift): used, and sync_skew_us then 0, when its spread tells the calls with a sleeping
  // member better than no drift, and drift_allowed.
  DriftFit drift;
  // fit_all's input: whether the drift may be used. choose_arrival_model (arrival_model.hpp)
  // clears it when the constant skew predicts the calibration's own executions better, and
  // records both: the executed scenarios' mean |in-sample error| (%) with the drift and with
  // the constant skew (NaN: not compared).
  bool drift_allowed = true;
  double in_sample_drift_pct = std::numeric_limits<double>::quiet_NaN();
  double in_sample_skew_pct = std::numeric_limits<double>::quiet_NaN();
  [[nodiscard]] bool drift_used() const { return drift_allowed && drift.use(); }
  // DeviceSpec::compute_tail: per in-situ execution (not when compute is replayed by CPU time),
  // its compute ops' summed time over their keys' medians summed, minus 1; the median over the
  // executions (0: none taken).
  double compute_tail = 0;
  size_t compute_tail_samples = 0, compute_tail_executions = 0;
  [[nodiscard]] double sync_drift() const { return drift_used() ? drift.rate : 0.0; }
  // The executor's poller spin window on a CPU host (0 elsewhere: no poller sleeps).
  [[nodiscard]] double poll_spin_us() const { return base.device.kind == DeviceKind::cpu ? exec::kPollSpinUs : 0.0; }
  [[nodiscard]] double spread_drift() const { return drift_used() ? drift.spread : 0.0; }
  double comm_in_situ_extra_us = 0;
  // c: the awake executed calls moved their bytes (1 + c) times slower than the sweep's fit
  // says (lad_fit.hpp: fitted with the per-call extras, weighted least absolute deviations);
  // the calibrated topology's intra_efficiency is 1 / (1 + c) and its reduce_gbps R / (1 + c).
  double comm_in_situ_bytes_slowdown = 0;
  // The transfers' own (CollectiveSpec::p2p_launch_lat_us), when at least 20 awake transfer
  // calls and 20 awake collective calls were seen (p2p_extra_own; comm_in_situ_extra_us is
  // then the collectives'); else both are the one cost fitted over every awake call. A call
  // is one op on one rank, its executions taken together (their median).
  // With fewer than 20 awake transfers beside at least 20 awake collectives, the transfers
  // take the sweep's fit alone (p2p_sweep_only; p2p_in_situ_extra_us 0): the collectives'
  // in-situ cost is not theirs.
  double p2p_in_situ_extra_us = 0;
  bool p2p_extra_own = false;
  bool p2p_sweep_only = false;
  size_t in_situ_awake_transfers = 0;
  // The contended collectives' own (CommSample::contended_since_us within the spin window),
  // when at least 20 awake contended and 20 other awake collective calls were seen
  // (contended_extra_own; else comm_in_situ_extra_us): the calibrated topology's
  // contended_lat_us is what it adds to launch's per-call cost (at least 0).
  double contended_in_situ_extra_us = 0;
  bool contended_extra_own = false;
  size_t in_situ_awake_contended = 0;
  // CPU: what a call one of whose pollers stopped spinning before it ended (exec::kPollSpinUs
  // from the first post: CommSample::spread_us plus the fit) took beyond the fit, median over its
  // members, minus the median of the other calls (which alone set the per-call extras then):
  // CollectiveSpec::wake_us. Counts of the two kinds of calls.
  double wake_us = 0;
  size_t in_situ_awake_calls = 0, in_situ_asleep_calls = 0;
  double comm_in_situ_extra_all_us = 0;  // the median over all calls (for the file's comment)
  // Per class of collective (kind, group kind, phase: CommSample::call_class) with at least 20
  // awake calls not contended, their own per-call cost beyond the fit (the weighted median of
  // their extras beyond the bytes' slow-down, at least 0): the calibrated topology's
  // [[calibration.call]] points (launch_us + extra_us; beside compute, launch_us +
  // beside_extra_us where the class has that). The other collectives keep
  // comm_in_situ_extra_us; wake_us is taken beyond each call's own cost.
  struct CallCost {
    CallClass cls;
    double extra_us = 0;
    size_t calls = 0;
    double executed_us = 0;  // the median of its calls' times (each its executions' median)
    // Its calls beside compute (CommSample::beside_compute), where they have a cost of their own
    // (CallPoint::beside_lat_us): their extra beyond the fit (at least extra_us), and how many.
    std::optional<double> beside_extra_us = std::nullopt;
    size_t beside_calls = 0;
  };
  std::vector<CallCost> call_costs;
  // CollectiveSpec::call_tail_us: per in-situ execution, its calls' mean time beyond their
  // predicted time (the fit and the per-call costs above), the median over the executions
  // (at least 0), and how many executions gave it (0: not measured).
  double call_tail_us = 0;
  size_t call_tail_executions = 0;
  [[nodiscard]] bool have_in_situ_comm() const { return have_comm_fit && !in_situ.comm.empty(); }

  Topology base;                         // the topology the fitted values replace
};

// Collective over `world`: every rank calls it with the same options. Rank 0 gets the pooled
// samples and the fits; other ranks get an empty result. Throws on bad scenarios (ConfigError)
// and on backend failures (exec::ExecError).
CalibrationResult run_calibration(exec::Transport& world, const CalibrateOptions& opts);

// One earlier launch of the in-situ executions (5. alone, InSituPlan{opts.in_situ_launches}):
// collective like run_calibration; rank 0 writes the traces of each scenario of the job's size
// under `dir` (write_in_situ_traces, the scenario's place in opts.scenarios as its index) for
// the measuring job's `in_situ_from`. Returns the executions traced (on rank 0; 0 elsewhere).
int run_in_situ_launch(exec::Transport& world, const CalibrateOptions& opts, const std::filesystem::path& dir);

// Fits the models to pooled samples (rank 0 of run_calibration does this; exposed for tests).
void fit_all(CalibrationResult& r);

// The calibrated topology: `base` with the fitted device, link and collective parameters and
// every measured point as [[calibration.gemm]] / [[calibration.kernel]].
Topology calibrated_topology(const CalibrationResult& r);
// The same as a topology file, every value commented with how and when it was measured.
std::string topology_toml(const CalibrationResult& r);


}  // namespace paralab::calib
