// paralab — direct patterns: all-to-all as concurrent point-to-point transfers, and send/recv.
//
// All-to-all (NCCL implements it as grouped ncclSend/ncclRecv to every peer, all in flight at
// once): every ordered pair (i, j), i != j, moves N/n. Intra-node and inter-node pairs are two
// flows, because NVLink pairs would otherwise be held to the network's pace; the call ends
// when the slower finishes. Latency: one step plus the slowest pair's path latency.
//   T ~ launch + s + a_max + max( (g-1)/n * N / B_intra_per_device, (n-g)/n * N / B_nic ) for
// g members per node sharing nothing but their own links.
// Send/recv: one transfer of N bytes, T = launch + s + a_path + N / B_path.
#include <algorithm>

#include "ir/error.hpp"
#include "sim/net/collective.hpp"

namespace paralab::sim {

LogicalPattern build_direct_all_to_all(const BuildContext& ctx) {
  LogicalPattern p;
  const uint32_t n = ctx.size();
  if (n < 2) return p;
  std::vector<uint32_t> node_pos(n);
  for (size_t k = 0; k < ctx.nodes(); ++k)
    for (uint32_t i : ctx.by_node()[k]) node_pos[i] = static_cast<uint32_t>(k);
  LogicalFlow intra, inter;
  const double frac = 1.0 / n;
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t j = 0; j < n; ++j) {
      if (i == j) continue;
      (node_pos[i] == node_pos[j] ? intra : inter).transfers.push_back(Transfer{i, j, frac});
    }
  LogicalPhase phase;
  phase.latency_us = ctx.step_lat_us() + std::max(max_path_lat_us(ctx, intra),
                                                  max_path_lat_us(ctx, inter));
  if (!intra.transfers.empty()) phase.flows.push_back(std::move(intra));
  if (!inter.transfers.empty()) phase.flows.push_back(std::move(inter));
  p.phases.push_back(std::move(phase));
  return p;
}

LogicalPattern build_direct_p2p(const BuildContext& ctx) {
  if (ctx.size() != 2) throw InternalError("p2p request needs members = {src, dst}");
  LogicalPattern p;
  LogicalPhase phase;
  LogicalFlow flow;
  flow.transfers.push_back(Transfer{0, 1, 1.0});
  phase.latency_us = steps_latency_us(ctx, flow, 1);
  phase.flows.push_back(std::move(flow));
  p.phases.push_back(std::move(phase));
  return p;
}

}  // namespace paralab::sim
