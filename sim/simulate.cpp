// paralab — simulate(): compute model + network model + engine + finalize.
#include "sim/simulate.hpp"

#include <chrono>

#include "sim/compute/compute_model.hpp"
#include "sim/engine/rank_classes.hpp"
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
  const VariationConfig& variation = options.variation ? *options.variation : ir.scenario.variation;
  NetworkModel net(topo, ir.layout, ir.scenario.simulation.collective_algorithm, variation.links);
  net.set_check_invariants(options.check_invariants);
  sim.network_build_s = seconds_since(t0);

  // Per-rank mode: the draw's hardware, its classes and the node groups' compute models.
  sim.per_rank = options.per_rank || variation.any();
  RankClasses classes;
  std::vector<ComputeModel> node_models;
  if (sim.per_rank) {
    std::vector<RankHardware> hw = draw_hardware(ir, variation, options.sample);
    if (ir.scenario.simulation.pace_tensor_groups) pace_tensor_groups(ir, hw);
    classes = rank_classes(ir, hw);
    node_models.reserve(variation.node_groups.size());
    for (const NodeGroup& g : variation.node_groups) node_models.emplace_back(g.resolved);
  }
  const auto t1 = std::chrono::steady_clock::now();
  EngineOptions eo;
  eo.record_ops = options.record_ops;
  eo.check_invariants = options.check_invariants;
  if (sim.per_rank) {
    eo.classes = &classes;
    for (const ComputeModel& m : node_models) eo.node_models.push_back(&m);
  }
  EngineOutput out = run_engine(ir, compute, net, eo);
  sim.engine_s = seconds_since(t1);
  sim.network = net.stats();
  sim.simulated_ranks = static_cast<int64_t>(out.ranks.size());
  sim.end_us = out.end_us;
  sim.critical_compute_us = std::move(out.critical_compute_us);
  sim.critical_comm_us = out.critical_comm_us;

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
