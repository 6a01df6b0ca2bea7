// paralab — the calibration's measuring jobs, run on every rank of the calibration at once
// (calibrate.cpp strings them together): replaying compute ops, the sweep's one-layer models,
// the collective sweep, the copy bandwidth, and pooling every rank's samples on rank 0.
// Internal to analysis/calibration.
#pragma once

#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "analysis/calibration/calibrate.hpp"
#include "analysis/calibration/measure.hpp"

namespace paralab::calib::detail {

using Progress = std::function<void(double, const std::string&)>;

// One replay job: a rank of a scenario's IR, and where its samples come from.
struct ReplayJob {
  const StepIR* ir = nullptr;
  int64_t rank = 0;
  std::string origin;  // "scenario NAME" | "sweep"
};

// The sweep's one-layer models (docs/calibration.md, "Sweep") on `base`, built into `irs` (kept
// alive there) as replay jobs.
std::vector<ReplayJob> sweep_jobs(bool quick, const std::filesystem::path& base, const std::filesystem::path& tmp,
                                  std::deque<StepIR>& irs);

// Every compute op of the jobs, `reps` timed passes after a warm-up, every rank in lockstep;
// `progress` gets one unit per pass. Adds to `out` (per key); the first device seen to `gpu`.
void replay_compute(const std::vector<ReplayJob>& jobs, exec::Transport& world, const CalibrateOptions& opts,
                    bool cpu_time, std::map<OpKey, OpSamples>& out, std::optional<exec::DeviceIdentity>& gpu,
                    const Progress& progress);

// The calls the scenarios make, per group size: (pattern, dtype, bytes) -> how often.
using ScenarioCalls = std::map<int64_t, std::map<CommCase, double>>;
ScenarioCalls scenario_calls(const std::vector<const StepIR*>& irs);

// The collective sweep (every pattern over sizes, and every call the scenarios make) on pairs and
// on every rank of the job, on the backend's own communicators.
std::vector<CommPoint> comm_sweep(exec::Transport& world, const CalibrateOptions& opts, const Topology& base,
                                  const std::filesystem::path& base_file, const std::filesystem::path& tmp,
                                  const ScenarioCalls& calls, std::optional<exec::DeviceIdentity>& gpu, const Progress& progress);
// How many progress units comm_sweep reports for a job of n ranks.
double comm_sweep_units(int n, const CalibrateOptions& opts, const ScenarioCalls& calls);

// Streaming copy bandwidth one rank gets with every rank copying at once (GB/s).
double copy_bandwidth_gbps(exec::Transport& world);

// Every rank's samples pooled on rank 0 into r.compute, r.comm and r.copy_gbps (per key; the
// scenarios' calls weigh each point by how often they make it). Collective.
void pool_samples(exec::Transport& world, const std::map<OpKey, OpSamples>& compute, const std::vector<CommPoint>& comm,
                  double copy_gbps, const ScenarioCalls& calls, CalibrationResult& r);

}  // namespace paralab::calib::detail
