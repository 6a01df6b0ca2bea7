// paralab — the data-parallel half of the planner's lower bound (lower_bound.hpp): the
// bandwidth-only time of a layer's data-parallel collectives, from probes of one and two layers
// with one and two micro-batches.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "ir/error.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/step_ir.hpp"
#include "plan/lower_bound.hpp"
#include "sim/net/network_model.hpp"

namespace paralab {

namespace {

// The least us per byte any algorithm the model may pick for `req` costs. A call's time is
// launch + phase latencies + bytes x us_per_byte of its pattern (sim/net/pattern.hpp), so
// bytes x this is a lower bound on it whatever the size picks, and sharing links only slows it.
double least_us_per_byte(sim::NetworkModel& net, sim::CommRequest req, CollectiveAlgo forced) {
  constexpr int64_t kX = int64_t{1} << 30;
  auto slope = [&](CollectiveAlgo a) {
    req.algo = a;
    req.bytes = kX;
    const double t1 = net.isolated_time_us(req);
    req.bytes = 2 * kX;
    return (net.isolated_time_us(req) - t1) / static_cast<double>(kX);
  };
  if (forced != CollectiveAlgo::automatic) return slope(CollectiveAlgo::automatic);
  return std::min(slope(CollectiveAlgo::ring), slope(CollectiveAlgo::tree));
}

// Bandwidth-only microseconds of stage 0's data-parallel stream in a probe of `s` with
// `layers` layers and `microbatches` micro-batches on one pipeline stage; NaN when the probe's
// ranks do not make whole nodes.
double dp_stream_us(const Scenario& s, int64_t layers, int64_t microbatches) {
  Scenario p = one_stage_probe(s, layers, microbatches, s.parallel.data);
  const int64_t ranks = p.parallel.tensor * p.parallel.context * p.parallel.data;
  const int64_t per_node = std::max<int64_t>(1, s.cluster.devices_per_node);
  if (ranks < per_node) {
    p.cluster.devices_per_node = ranks;
    p.cluster.nodes = 1;
  } else if (ranks % per_node == 0) {
    p.cluster.nodes = ranks / per_node;
  } else {
    return std::numeric_limits<double>::quiet_NaN();
  }
  validate_scenario(p);
  const StepIR ir = build_step_ir(p);
  sim::NetworkModel net(sim::network_view(p.topology, ir.layout), ir.layout, p.simulation.collective_algorithm);
  const int64_t rank = ir.layout.representative(0);
  std::map<std::tuple<int, int>, double> beta;  // (kind, group) -> us per byte
  double us = 0;
  for (const Op& op : ir.stages.at(0).ops) {
    if (op.stream != Stream::dp_comm || op.kind != OpKind::collective) continue;
    const CollectiveAttrs& c = *op.collective();
    if (c.bytes <= 0) continue;
    const auto key = std::make_tuple(static_cast<int>(c.kind), static_cast<int>(c.group));
    auto it = beta.find(key);
    if (it == beta.end()) {
      sim::CommRequest req;
      req.kind = sim::to_net(c.kind);
      req.group = c.group;
      req.members = ir.layout.members(c.group, rank);
      req.symmetric_copies = true;
      const double b = req.members.size() < 2 ? 0.0 : least_us_per_byte(net, req, p.simulation.collective_algorithm);
      it = beta.emplace(key, std::max(0.0, b)).first;
    }
    us += it->second * static_cast<double>(c.bytes);
  }
  return us;
}

}  // namespace

DpCosts probe_dp_costs(const Scenario& s) {
  if (s.parallel.data <= 1) return {};
  const double t11 = dp_stream_us(s, 1, 1), t21 = dp_stream_us(s, 2, 1);
  const double t12 = dp_stream_us(s, 1, 2), t22 = dp_stream_us(s, 2, 2);
  if (std::isnan(t11) || std::isnan(t21) || std::isnan(t12) || std::isnan(t22)) return {};
  // T(L, m) = c + L b + m e + L m a: the layers' share, whatever the embedding and head add.
  DpCosts d;
  d.layer_mb_us = std::max(0.0, t22 - t21 - t12 + t11);
  d.layer_us = std::max(0.0, t21 - t11 - d.layer_mb_us);
  return d;
}

}  // namespace paralab
