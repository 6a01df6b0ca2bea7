// paralab — the group view builders use (node-major order, channels) and shared helpers.
#include <algorithm>
#include <numeric>

#include "ir/error.hpp"
#include "sim/net/collective.hpp"

namespace paralab::sim {

std::string_view to_string(AlgoId a) {
  switch (a) {
    case AlgoId::ring: return "ring";
    case AlgoId::tree: return "tree";
    case AlgoId::hierarchical: return "hierarchical";
    case AlgoId::direct: return "direct";
  }
  return "?";
}

std::string_view to_string(CollKind k) {
  switch (k) {
    case CollKind::all_reduce: return "all_reduce";
    case CollKind::all_gather: return "all_gather";
    case CollKind::reduce_scatter: return "reduce_scatter";
    case CollKind::all_to_all: return "all_to_all";
    case CollKind::broadcast: return "broadcast";
    case CollKind::reduce: return "reduce";
    case CollKind::gather: return "gather";
    case CollKind::scatter: return "scatter";
    case CollKind::p2p: return "p2p";
  }
  return "?";
}

CollKind to_net(paralab::CollKind k) {
  switch (k) {
    case paralab::CollKind::all_reduce: return CollKind::all_reduce;
    case paralab::CollKind::all_gather: return CollKind::all_gather;
    case paralab::CollKind::reduce_scatter: return CollKind::reduce_scatter;
    case paralab::CollKind::all_to_all: return CollKind::all_to_all;
    case paralab::CollKind::broadcast: return CollKind::broadcast;
    case paralab::CollKind::reduce: return CollKind::reduce;
    case paralab::CollKind::gather: return CollKind::gather;
    case paralab::CollKind::scatter: return CollKind::scatter;
  }
  return CollKind::all_reduce;
}

BuildContext::BuildContext(const std::vector<int64_t>& members, const TopologyGraph& graph,
                           Router& router, double step_lat_us)
    : members_(members), router_(router), step_lat_us_(step_lat_us) {
  const int64_t dpn = graph.devices_per_node();
  std::vector<uint32_t> idx(members.size());
  std::iota(idx.begin(), idx.end(), 0u);
  // A rank is its global device index (node * devices_per_node + local), so sorting by rank is
  // node-major with local devices in order.
  std::stable_sort(idx.begin(), idx.end(),
                   [&](uint32_t a, uint32_t b) { return members[a] < members[b]; });
  int64_t cur = -1;
  for (uint32_t i : idx) {
    const int64_t node = members[i] / dpn;
    if (node != cur) {
      by_node_.emplace_back();
      cur = node;
    }
    by_node_.back().push_back(i);
  }
  // Entry members: the first member of a node behind each NIC not seen before on that node.
  for (const auto& local : by_node_) {
    std::vector<uint32_t> entries;
    std::vector<int64_t> seen;
    for (uint32_t p = 0; p < local.size(); ++p) {
      const int64_t nic =
          graph.nics_per_node() > 0 ? graph.nic_of_local(members[local[p]] % dpn) : 0;
      if (std::find(seen.begin(), seen.end(), nic) == seen.end()) {
        seen.push_back(nic);
        entries.push_back(p);
      }
    }
    entry_.push_back(std::move(entries));
  }
  channels_ = 1;
  if (by_node_.size() > 1) {
    channels_ = static_cast<int64_t>(entry_[0].size());
    for (const auto& e : entry_) channels_ = std::min<int64_t>(channels_, e.size());
  }
  for (const auto& local : by_node_) uniform_ = uniform_ && local.size() == by_node_[0].size();
}

double BuildContext::path_lat_us(uint32_t a, uint32_t b) const {
  return router_.route(members_[a], members_[b]).lat_us;
}

std::vector<uint32_t> BuildContext::node_order(size_t pos, int64_t c) const {
  const auto& local = by_node_[pos];
  const auto& entries = entry_[pos];
  const size_t start = entries[static_cast<size_t>(c) % entries.size()];
  std::vector<uint32_t> out;
  out.reserve(local.size());
  for (size_t i = 0; i < local.size(); ++i) out.push_back(local[(start + i) % local.size()]);
  return out;
}

std::vector<uint32_t> BuildContext::ring_order(int64_t c) const {
  std::vector<uint32_t> out;
  out.reserve(members_.size());
  for (size_t pos = 0; pos < by_node_.size(); ++pos) {
    const auto part = node_order(pos, c);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

void add_chain(LogicalFlow& flow, const std::vector<uint32_t>& order, double frac, bool closed) {
  if (order.size() < 2) return;
  for (size_t i = 0; i + 1 < order.size(); ++i)
    flow.transfers.push_back(Transfer{order[i], order[i + 1], frac});
  if (closed) flow.transfers.push_back(Transfer{order.back(), order.front(), frac});
}

double max_path_lat_us(const BuildContext& ctx, const LogicalFlow& flow) {
  double lat = 0;
  for (const Transfer& t : flow.transfers) lat = std::max(lat, ctx.path_lat_us(t.src, t.dst));
  return lat;
}

double steps_latency_us(const BuildContext& ctx, const LogicalFlow& flow, int64_t steps) {
  return static_cast<double>(steps) * (ctx.step_lat_us() + max_path_lat_us(ctx, flow));
}

}  // namespace paralab::sim
