// paralab — NCCL's double binary tree all-reduce (NCCL >= 2.4).
//
// Across nodes, two binary trees over the nodes, each reducing-then-broadcasting half of the
// buffer; the second tree is the first shifted by one rank so that the first's inner nodes are
// (mostly) the second's leaves, which keeps every node's send and receive load near 2N in
// total (Sanders, Speck & Traeff, "Two-tree algorithms for full bandwidth broadcast, reduction
// and scan", Parallel Computing 35(12), 2009; NVIDIA blog "Massively Scale Your Deep Learning
// Training with NCCL 2.4", 2019). Inside a node the tree is a chain through the node's members
// (NCCL's intra-node tree is a chain). The reduce (up) and broadcast (down) are pipelined over
// chunks, so they overlap and the whole call is one lockstep flow in which every tree edge
// carries N/(2*channels) bytes in each direction, plus a latency of
//   2*depth*(step_lat + inter-node path latency) + 2*(g-1)*(step_lat + intra path latency),
// i.e. T ~ 2N/B + 2*log2(nodes)*alpha for large node counts (NCCL's tuning model uses the same
// latency-bandwidth form, src/graph/tuning.cc).
#include <algorithm>

#include "sim/net/collective.hpp"

namespace paralab::sim {

namespace {

// The x in [lo+1, hi] divisible by the largest power of two; minus one. That node is the root
// of the in-order tree over [lo, hi): leaves end up on even indices, inner nodes on odd ones.
int64_t pick_root(int64_t lo, int64_t hi) {
  int64_t p = 1;
  while (p * 2 <= hi) p *= 2;
  for (; p >= 1; p /= 2) {
    const int64_t x = ((lo + 1 + p - 1) / p) * p;
    if (x <= hi) return x - 1;
  }
  return lo;
}

void build_range(int64_t lo, int64_t hi, int64_t parent, std::vector<int64_t>& out) {
  if (lo >= hi) return;
  const int64_t r = pick_root(lo, hi);
  out[r] = parent;
  build_range(lo, r, r, out);
  build_range(r + 1, hi, r, out);
}

}  // namespace

std::vector<int64_t> inorder_tree(int64_t m) {
  std::vector<int64_t> parent(static_cast<size_t>(m), -1);
  build_range(0, m, -1, parent);
  return parent;
}

int64_t tree_depth(const std::vector<int64_t>& parent) {
  int64_t depth = 0;
  for (size_t i = 0; i < parent.size(); ++i) {
    int64_t d = 0;
    for (int64_t v = static_cast<int64_t>(i); parent[v] >= 0; v = parent[v]) ++d;
    depth = std::max(depth, d);
  }
  return depth;
}

LogicalPattern build_tree_all_reduce(const BuildContext& ctx) {
  LogicalPattern p;
  if (ctx.size() < 2) return p;
  const auto m = static_cast<int64_t>(ctx.nodes());
  const int64_t ch = ctx.channels();
  const std::vector<int64_t> t1 = inorder_tree(m);
  std::vector<int64_t> t2(t1.size(), -1);  // t1 with every label shifted by one
  for (int64_t i = 0; i < m; ++i) {
    const int64_t src = (i - 1 + m) % m;
    t2[i] = t1[src] < 0 ? -1 : (t1[src] + 1) % m;
  }
  const double frac = 1.0 / (2.0 * static_cast<double>(ch));
  LogicalFlow flow, inter, intra;  // inter/intra only measure latencies
  size_t gmax = 1;
  for (int64_t c = 0; c < ch; ++c) {
    std::vector<std::vector<uint32_t>> chains;
    for (int64_t k = 0; k < m; ++k) chains.push_back(ctx.node_order(static_cast<size_t>(k), c));
    const std::vector<int64_t>* trees[] = {&t1, &t2};
    for (const std::vector<int64_t>* parent : trees) {
      for (int64_t k = 0; k < m; ++k) {
        const auto& chain = chains[k];
        gmax = std::max(gmax, chain.size());
        std::vector<uint32_t> up(chain.rbegin(), chain.rend());
        add_chain(flow, chain, frac, false);  // broadcast down the chain
        add_chain(flow, up, frac, false);     // reduce up the chain
        add_chain(intra, chain, frac, false);
        const int64_t par = (*parent)[k];
        if (par < 0) continue;
        const uint32_t child_head = chain.front(), parent_head = chains[par].front();
        flow.transfers.push_back(Transfer{child_head, parent_head, frac});
        flow.transfers.push_back(Transfer{parent_head, child_head, frac});
        inter.transfers.push_back(Transfer{child_head, parent_head, frac});
      }
    }
  }
  const int64_t depth = std::max(tree_depth(t1), tree_depth(t2));
  LogicalPhase phase;
  phase.latency_us = steps_latency_us(ctx, inter, 2 * depth) +
                     steps_latency_us(ctx, intra, 2 * (static_cast<int64_t>(gmax) - 1));
  phase.flows.push_back(std::move(flow));
  p.phases.push_back(std::move(phase));
  return p;
}

}  // namespace paralab::sim
