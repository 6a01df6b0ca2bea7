// paralab — `paralab calibrate`: measure this machine with the executor's own code paths, fit the
// hardware and the corrections, write a topology the simulator accepts as it is
// (docs/calibration.md).
//
//   exec::Transport& world = ...;                                          // every rank of the job
//   calib::CalibrationResult r = calib::run_calibration(world, options);   // collective
//   if (world.rank() == 0) write(calib::calibration_toml(r));
//
// Measured by every rank of the job at once (each rank sees the contention of the real run):
//   1. compute ops: the given scenarios' (replayed with the executor's code, measure.hpp) and a
//      sweep of GEMM shapes and kernel sizes; the fits give the device's rates (hardware.cpp);
//   2. collectives and transfers over sizes: the alpha-beta fit gives the links and launch costs;
//   3. the host's streaming copy bandwidth;
//   4. each scenario of the job's size executed (executions.hpp): its ops' times as the step runs
//      them become its measured op times, and the corrections are fitted to how its step
//      differs from its simulation on the fitted hardware (samples.hpp, corrections.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/calibration/fit.hpp"
#include "analysis/calibration/measure.hpp"
#include "analysis/host_info.hpp"
#include "exec/comm.hpp"
#include "ir/topology.hpp"
#include "results/step_result.hpp"

namespace paralab::calib {

struct CalibrateOptions {
  std::string backend = "cpu";
  std::vector<std::filesystem::path> scenarios;  // measure exactly their ops
  std::vector<std::string> sets;                 // --set overrides applied to every scenario
  std::filesystem::path base_topology;           // default: the first scenario's, else cpu-host
  int reps = 5;                                  // timed passes per replay (after one warm-up pass)
  bool sweep = true;                             // the shape sweep for the fits
  bool comm = true;                              // collectives and transfers
  bool quick = false;                            // a smaller sweep and fewer sizes (tests)
  bool execute = true;                           // execute the scenarios of the job's size (4.)
  // Called on rank 0 with the fraction done and what is being measured.
  std::function<void(double, const std::string&)> progress;
};

// One executed scenario: its steps as measured (rank 0: every rank's ops).
struct ScenarioExecution {
  std::filesystem::path file;
  std::string name, digest;
  std::vector<StepResult> steps;
};

struct CalibrationResult {
  // What measured, where and when.
  std::string backend;
  int ranks = 1;  // processes in the job, busy at once
  int reps = 0;
  std::vector<std::string> scenarios;
  std::vector<std::string> sets;  // applied to every scenario (the executions are re-simulated with them)
  std::string started_utc, paralab_version;
  double wall_s = 0;
  HostInfo host;
  std::optional<exec::DeviceIdentity> gpu;  // the GPU measured, where it is not the host
  // More ranks than the host's cores (CPU backend): replayed ops were timed by thread CPU time
  // (their work; the simulator shares the node's cores among the ranks itself).
  bool compute_cpu_time = false;
  Topology base;  // the topology the fitted values replace

  // Measurements: compute samples pooled over ranks (executed keys: their in-step times),
  // communication pooled over members, copy bandwidth per rank, the executions.
  std::vector<OpSamples> compute;
  std::vector<CommPoint> comm;
  double copy_gbps = 0;
  std::vector<ScenarioExecution> executions;

  // Fits (fit_hardware) and the corrections (fit_all).
  std::map<MathMode, GemmFit> gemm;
  StreamFit stream;  // every memory-bound kernel together
  std::optional<AlphaBetaFit> comm_fit;
  double flash_fwd_efficiency = 0, flash_bwd_efficiency = 0;  // 0: not measured
  std::vector<CorrectionRow> corrections;
};

// Collective over `world`: every rank calls it with the same options. Rank 0 gets the samples,
// the fits and the corrections; the others an empty result. Throws on bad scenarios
// (ConfigError) and on backend failures (exec::ExecError).
CalibrationResult run_calibration(exec::Transport& world, const CalibrateOptions& opts);

// The fits of the device and the links to r's samples (hardware.cpp).
void fit_hardware(CalibrationResult& r);
// The hardware those fits describe, with r's measured op times and no corrections.
Topology calibrated_hardware(const CalibrationResult& r);
// fit_hardware, then the corrections to r's executions simulated on calibrated_hardware.
void fit_all(CalibrationResult& r);

// The calibrated topology: the hardware, the measured op times, the corrections and the
// executions' steps (validate's yardstick).
Topology calibrated_topology(const CalibrationResult& r);
// The same as a file, its header and values saying how and when they were measured (write.cpp).
std::string calibration_toml(const CalibrationResult& r);

}  // namespace paralab::calib
