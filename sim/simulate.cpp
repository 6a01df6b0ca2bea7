// paralab — simulate(): compute model + network model + engine + finalize.
#include "sim/simulate.hpp"

#include <chrono>

#include "sim/compute/compute_model.hpp"
#include "sim/net/network_model.hpp"

namespace paralab::sim {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Simulation simulate(const StepIR& ir, const SimulateOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  Simulation sim;
  // The network is built with the layout's node: fewer devices than the topology's node holds
  // (cluster.devices_per_node, e.g. 2 ranks on a 4-core host), or an NVLink domain of hosts.
  const Topology topo = network_view(ir.scenario.topology, ir.layout);
  const ComputeModel compute(topo);
  NetworkModel net(topo, ir.layout, ir.scenario.simulation.collective_algorithm);
  net.set_check_invariants(options.check_invariants);
  sim.network_build_s = seconds_since(t0);

  const auto t1 = std::chrono::steady_clock::now();
  EngineOptions eo;
  eo.record_ops = options.record_ops;
  eo.check_invariants = options.check_invariants;
  EngineOutput out = run_engine(ir, compute, net, eo);
  sim.engine_s = seconds_since(t1);
  sim.network = net.stats();

  const auto t2 = std::chrono::steady_clock::now();
  StepResult& r = sim.result;
  r.kind = "predicted";
  r.backend = "simulator";
  r.ops = std::move(out.ops);
  r.ranks = std::move(out.ranks);
  r.events = out.events;
  finalize(r, ir);
  // finalize() dates an out-of-memory rank by its peak; the engine knows the first moment the
  // capacity was exceeded, which is what a user needs to find the culprit.
  if (r.oom_rank) {
    const RankMemory* first = nullptr;
    for (const RankMemory& m : out.memory)
      if (m.over_capacity_us && (!first || *m.over_capacity_us < *first->over_capacity_us)) first = &m;
    if (first) {
      r.oom_rank = first->rank;
      r.oom_time_us = *first->over_capacity_us;
    }
  }
  sim.memory = std::move(out.memory);
  sim.finalize_s = seconds_since(t2);
  r.wall_s = seconds_since(t0);
  return sim;
}

}  // namespace paralab::sim
