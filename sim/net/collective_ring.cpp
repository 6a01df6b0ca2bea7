// paralab — ring algorithms (NCCL's ring: one pipelined ring per channel, node-major order).
//
// With n ranks and a buffer of N bytes, a ring all-reduce is a reduce-scatter followed by an
// all-gather, 2(n-1) steps each moving N/n per rank (Patarasuk & Yuan, "Bandwidth optimal
// all-reduce algorithms for clusters of workstations", JPDC 2009; NCCL's ring, see NCCL docs
// "Collective Operations" and nccl-tests PERFORMANCE.md busbw = algbw * 2(n-1)/n). Pipelined,
// every ring edge carries 2(n-1)/n * N / channels bytes, all edges at the rate of the slowest,
// so one lockstep flow models the whole ring (all channels):
//   T = launch + 2(n-1) * (step_lat + slowest edge latency) + 2(n-1)/n * N / (channels * B).
// All-gather and reduce-scatter are one half: (n-1) steps, (n-1)/n * N per edge. Broadcast is
// a pipelined chain from the root: (n-1) steps, N per edge; reduce the same chain toward it.
#include <algorithm>

#include "sim/net/collective.hpp"

namespace paralab::sim {

namespace {

// One phase, one flow: every channel's closed ring with `frac_total / channels` per edge.
LogicalPattern ring_pattern(const BuildContext& ctx, double frac_total, int64_t steps) {
  LogicalPattern p;
  const uint32_t n = ctx.size();
  if (n < 2) return p;
  const int64_t ch = ctx.channels();
  LogicalFlow flow;
  for (int64_t c = 0; c < ch; ++c)
    add_chain(flow, ctx.ring_order(c), frac_total / static_cast<double>(ch), true);
  LogicalPhase phase;
  phase.latency_us = steps_latency_us(ctx, flow, steps);
  phase.flows.push_back(std::move(flow));
  p.phases.push_back(std::move(phase));
  return p;
}

}  // namespace

LogicalPattern build_ring_all_reduce(const BuildContext& ctx) {
  const double n = ctx.size();
  return ring_pattern(ctx, 2.0 * (n - 1) / n, 2 * (static_cast<int64_t>(n) - 1));
}

LogicalPattern build_ring_all_gather(const BuildContext& ctx) {
  const double n = ctx.size();
  return ring_pattern(ctx, (n - 1) / n, static_cast<int64_t>(n) - 1);
}

LogicalPattern build_ring_reduce_scatter(const BuildContext& ctx) {
  const double n = ctx.size();
  return ring_pattern(ctx, (n - 1) / n, static_cast<int64_t>(n) - 1);
}

namespace {
// Each channel's ring as a chain from the root (member 0), minus the edge back to it; toward
// the root instead (`to_root`: a reduce, the same chain reversed, NCCL's ring reduce).
LogicalPattern rooted_chain(const BuildContext& ctx, bool to_root) {
  LogicalPattern p;
  const uint32_t n = ctx.size();
  if (n < 2) return p;
  const int64_t ch = ctx.channels();
  LogicalFlow flow;
  for (int64_t c = 0; c < ch; ++c) {
    auto order = ctx.ring_order(c);
    size_t root = 0;
    while (order[root] != 0) ++root;
    std::vector<uint32_t> chain;
    chain.reserve(n);
    for (size_t i = 0; i < n; ++i) chain.push_back(order[(root + i) % n]);
    if (to_root) std::reverse(chain.begin(), chain.end());
    add_chain(flow, chain, 1.0 / static_cast<double>(ch), false);
  }
  LogicalPhase phase;
  phase.latency_us = steps_latency_us(ctx, flow, static_cast<int64_t>(n) - 1);
  phase.flows.push_back(std::move(flow));
  p.phases.push_back(std::move(phase));
  return p;
}
}  // namespace

LogicalPattern build_ring_broadcast(const BuildContext& ctx) { return rooted_chain(ctx, false); }
LogicalPattern build_ring_reduce(const BuildContext& ctx) { return rooted_chain(ctx, true); }

}  // namespace paralab::sim
