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

namespace {
// The node of each member (its position in ctx.by_node()).
std::vector<uint32_t> member_nodes(const BuildContext& ctx) {
  std::vector<uint32_t> node_pos(ctx.size());
  for (size_t k = 0; k < ctx.nodes(); ++k)
    for (uint32_t i : ctx.by_node()[k]) node_pos[i] = static_cast<uint32_t>(k);
  return node_pos;
}
}  // namespace

LogicalPattern build_direct_all_to_all(const BuildContext& ctx) {
  LogicalPattern p;
  const uint32_t n = ctx.size();
  if (n < 2) return p;
  const std::vector<uint32_t> node_pos = member_nodes(ctx);
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

// Gather (scatter): every other member sends (receives) its N/n part to (from) the root at once,
// as cudaMemcpyPeer copies of nn.DataParallel's comm.gather / comm.scatter do; the root's link
// carries (n-1)/n N. Intra- and inter-node parts are two flows, as for all-to-all.
namespace {
LogicalPattern rooted_direct(const BuildContext& ctx, bool to_root) {
  LogicalPattern p;
  const uint32_t n = ctx.size();
  if (n < 2) return p;
  const std::vector<uint32_t> node_pos = member_nodes(ctx);
  LogicalFlow intra, inter;
  for (uint32_t i = 1; i < n; ++i)
    (node_pos[i] == node_pos[0] ? intra : inter)
        .transfers.push_back(to_root ? Transfer{i, 0, 1.0 / n} : Transfer{0, i, 1.0 / n});
  LogicalPhase phase;
  phase.latency_us = ctx.step_lat_us() + std::max(max_path_lat_us(ctx, intra), max_path_lat_us(ctx, inter));
  if (!intra.transfers.empty()) phase.flows.push_back(std::move(intra));
  if (!inter.transfers.empty()) phase.flows.push_back(std::move(inter));
  p.phases.push_back(std::move(phase));
  return p;
}
}  // namespace

LogicalPattern build_direct_gather(const BuildContext& ctx) { return rooted_direct(ctx, true); }
LogicalPattern build_direct_scatter(const BuildContext& ctx) { return rooted_direct(ctx, false); }

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
