// paralab — the simulator's entry point: a StepIR in, a predicted StepResult out.
//
//   const StepIR ir = build_step_ir(scenario);
//   const sim::Simulation s = sim::simulate(ir);
//   s.result.step_time_s, s.result.mfu, ...   (results/step_result.hpp)
//
// Builds the compute model and the network model from the scenario's topology, runs the event
// engine (sim/engine/engine.hpp) and derives the step figures with results' finalize(), the
// same code that derives measured figures. Deterministic; safe to call from several threads
// at once on different (or the same, read-only) IRs.
#pragma once

#include <vector>

#include "ir/step_ir.hpp"
#include "results/step_result.hpp"
#include "sim/engine/engine.hpp"
#include "sim/net/comm.hpp"

namespace paralab::sim {

struct SimulateOptions {
  bool record_ops = true;  // per-op timings in the result (finalize needs them for the breakdown)
  // Check the simulator's invariants as it runs (docs/hardening.md): time never goes
  // backwards, every byte sent is received, no link carries more than its bandwidth, every op
  // runs exactly once, memory returns to its steady state. A violation throws InternalError.
  // Read-only: results are bit-identical either way. On in debug builds, off in release.
  bool check_invariants = kCheckInvariantsByDefault;
  // Per-rank mode (docs/simulator.md): chosen when the scenario's [variation] makes ranks
  // differ; `per_rank` forces it without (the classes are then the stages). `sample` picks the
  // cluster draw (variation.seed + sample).
  bool per_rank = false;
  int64_t sample = 0;
  // The variation to draw from instead of the scenario's (e.g. it without its stragglers, to
  // price them); null: ir.scenario.variation.
  const VariationConfig* variation = nullptr;
};

struct Simulation {
  StepResult result;               // finalized; result.wall_s = this call's wall time
  std::vector<RankMemory> memory;  // per simulated rank (one per stage, or per class)
  int64_t simulated_ranks = 0;     // units the engine ran: stages, or classes in per-rank mode
  bool per_rank = false;
  double end_us = 0;               // when the step's last op ended (set with record_ops off too)
  // The critical path (EngineOutput): compute time on it per simulated rank, most first, and
  // communication time on it per group kind (us).
  std::vector<std::pair<int64_t, double>> critical_compute_us;
  std::array<double, static_cast<size_t>(GroupKind::kCount)> critical_comm_us{};
  CommStats network;               // the network model's counters
  double network_build_s = 0;      // building the cluster graph
  double engine_s = 0;             // the event loop
  double finalize_s = 0;           // deriving the figures
};

Simulation simulate(const StepIR& ir, const SimulateOptions& options = {});

}  // namespace paralab::sim
