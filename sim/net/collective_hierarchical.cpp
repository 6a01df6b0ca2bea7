// paralab — hierarchical (two-level) collectives: intra-node, then inter-node, then intra-node.
//
// All-reduce with g members on each of m nodes (Jia et al., "Highly scalable deep learning
// training system with mixed-precision", 2018, Sec. 3.3; Horovod's hierarchical allreduce):
//   1. reduce-scatter inside every node (ring over the g local members): (g-1)/g * N per edge,
//      g-1 steps;
//   2. all-reduce of each member's N/g shard across nodes, g parallel rings (ring j joins the
//      j-th member of every node, so the rings use different NICs): 2(m-1)/m * N/g per edge,
//      2(m-1) steps;
//   3. all-gather inside every node: (g-1)/g * N per edge, g-1 steps.
//   T = launch + 2[(g-1)(s + a_intra) + (g-1)/g * N/B_intra]
//              + 2(m-1)(s + a_inter) + 2(m-1)/m * (N/g)/B_inter
// All-gather is phase 2 (as an all-gather: (m-1)/m * N/g, m-1 steps) then phase 3;
// reduce-scatter is phase 1 then phase 2 as a reduce-scatter. Groups on one node, with one
// member per node, or with unequal members per node fall back to the ring.
#include "sim/net/collective.hpp"

namespace paralab::sim {

namespace {

bool applicable(const BuildContext& ctx) {
  return ctx.nodes() >= 2 && ctx.uniform() && ctx.by_node()[0].size() >= 2;
}

LogicalPhase intra_ring(const BuildContext& ctx, double frac, int64_t steps) {
  LogicalPhase phase;
  LogicalFlow flow;
  for (const auto& local : ctx.by_node()) add_chain(flow, local, frac, true);
  phase.latency_us = steps_latency_us(ctx, flow, steps);
  phase.flows.push_back(std::move(flow));
  return phase;
}

LogicalPhase inter_rings(const BuildContext& ctx, double frac, int64_t steps) {
  LogicalPhase phase;
  LogicalFlow flow;
  const size_t g = ctx.by_node()[0].size();
  for (size_t j = 0; j < g; ++j) {
    std::vector<uint32_t> ring;
    ring.reserve(ctx.nodes());
    for (const auto& local : ctx.by_node()) ring.push_back(local[j]);
    add_chain(flow, ring, frac, true);
  }
  phase.latency_us = steps_latency_us(ctx, flow, steps);
  phase.flows.push_back(std::move(flow));
  return phase;
}

}  // namespace

LogicalPattern build_hier_all_reduce(const BuildContext& ctx) {
  if (!applicable(ctx)) return build_ring_all_reduce(ctx);
  const auto g = static_cast<int64_t>(ctx.by_node()[0].size());
  const auto m = static_cast<int64_t>(ctx.nodes());
  const double gd = static_cast<double>(g), md = static_cast<double>(m);
  LogicalPattern p;
  p.phases.push_back(intra_ring(ctx, (gd - 1) / gd, g - 1));
  p.phases.push_back(inter_rings(ctx, 2.0 * (md - 1) / md / gd, 2 * (m - 1)));
  p.phases.push_back(intra_ring(ctx, (gd - 1) / gd, g - 1));
  return p;
}

LogicalPattern build_hier_all_gather(const BuildContext& ctx) {
  if (!applicable(ctx)) return build_ring_all_gather(ctx);
  const auto g = static_cast<int64_t>(ctx.by_node()[0].size());
  const auto m = static_cast<int64_t>(ctx.nodes());
  const double gd = static_cast<double>(g), md = static_cast<double>(m);
  LogicalPattern p;
  p.phases.push_back(inter_rings(ctx, (md - 1) / md / gd, m - 1));
  p.phases.push_back(intra_ring(ctx, (gd - 1) / gd, g - 1));
  return p;
}

LogicalPattern build_hier_reduce_scatter(const BuildContext& ctx) {
  if (!applicable(ctx)) return build_ring_reduce_scatter(ctx);
  const auto g = static_cast<int64_t>(ctx.by_node()[0].size());
  const auto m = static_cast<int64_t>(ctx.nodes());
  const double gd = static_cast<double>(g), md = static_cast<double>(m);
  LogicalPattern p;
  p.phases.push_back(intra_ring(ctx, (gd - 1) / gd, g - 1));
  p.phases.push_back(inter_rings(ctx, (md - 1) / md / gd, m - 1));
  return p;
}

}  // namespace paralab::sim
