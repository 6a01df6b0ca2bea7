// paralab — routing on the cluster graph (rule in routing.hpp and docs/network.md).
#include "sim/net/routing.hpp"

#include <string>

#include "ir/error.hpp"

namespace paralab::sim {

Router::Router(const TopologyGraph& graph)
    : g_(graph), pxn_(graph.shape().kind == NetworkKind::rail_optimized) {}

const Router::Route& Router::route(int64_t src_dev, int64_t dst_dev) {
  const uint64_t key = (static_cast<uint64_t>(src_dev) << 32) | static_cast<uint64_t>(dst_dev);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  scratch_.clear();
  compute(src_dev, dst_dev, scratch_);
  Route r;
  r.offset = static_cast<uint32_t>(pool_.size());
  r.len = static_cast<uint32_t>(scratch_.size());
  for (LinkId l : scratch_) r.lat_us += g_.link(l).lat_us;
  pool_.insert(pool_.end(), scratch_.begin(), scratch_.end());
  return cache_.emplace(key, r).first->second;
}

void Router::compute(int64_t src, int64_t dst, std::vector<LinkId>& out) const {
  if (src == dst) return;
  const int64_t dpn = g_.devices_per_node();
  const int64_t ns = src / dpn, nd = dst / dpn;
  if (ns == nd) {
    out.push_back(g_.dev_to_hub(src));
    out.push_back(g_.hub_to_dev(dst));
    return;
  }
  if (g_.shape().kind == NetworkKind::none)
    throw InternalError("Router: inter-node route requested on a topology without network");
  // Exits: the destination's NIC (or the next one up); the sender's, or with PXN the device on
  // the destination's rail, or the next NIC up.
  const int64_t nic_d = up_nic(nd, g_.nic_of_local(dst % dpn));
  const int64_t own = g_.nic_of_local(src % dpn);
  int64_t nic_s = pxn_ ? nic_d : own;
  if (up_nic(ns, nic_s) != nic_s) nic_s = up_nic(ns, own);
  int64_t sender = src;
  if (nic_s != own) {  // hop over the hub to the local device on that NIC
    sender = ns * dpn + g_.first_local_of_nic(nic_s);
    out.push_back(g_.dev_to_hub(src));
    out.push_back(g_.hub_to_dev(sender));
  }
  const int64_t nics = g_.nics_per_node();
  const int64_t gs = ns * nics + nic_s, gd = nd * nics + nic_d;
  out.push_back(g_.dev_to_nic(sender));
  out.push_back(g_.nic_to_leaf(gs));
  fabric(g_.leaf_of_nic(gs), g_.leaf_of_nic(gd), g_.host_index(gd), out);
  out.push_back(g_.leaf_to_nic(gd));
  if (nic_d == g_.nic_of_local(dst % dpn)) {
    out.push_back(g_.nic_to_dev(dst));
    return;
  }
  const int64_t receiver = nd * dpn + g_.first_local_of_nic(nic_d);  // and over the hub to dst
  out.push_back(g_.nic_to_dev(receiver));
  out.push_back(g_.dev_to_hub(receiver));
  out.push_back(g_.hub_to_dev(dst));
}

void Router::set_down(int64_t gnic) {
  if (down_.empty()) down_.assign(static_cast<size_t>(g_.nodes() * g_.nics_per_node()), 0);
  down_.at(static_cast<size_t>(gnic)) = 1;
  cache_.clear();
  pool_.clear();
}

int64_t Router::up_nic(int64_t node, int64_t nic) const {
  const int64_t nics = g_.nics_per_node();
  if (down_.empty()) return nic;
  for (int64_t i = 0; i < nics; ++i) {
    const int64_t n = (nic + i) % nics;
    if (!down_[static_cast<size_t>(node * nics + n)]) return n;
  }
  throw InternalError("Router: every NIC of node " + std::to_string(node) + " is down");
}

void Router::fabric(int64_t ls, int64_t ld, int64_t h, std::vector<LinkId>& out) const {
  if (ls == ld) return;
  const FabricShape& s = g_.shape();
  if (s.levels < 2)
    throw InternalError("Router: leaves " + std::to_string(ls) + " and " + std::to_string(ld) +
                        " are not joined by any switch (one-tier rail network)");
  // D-mod-k: the destination's host index picks the uplink at each tier going up.
  const int64_t u = s.up_ports, per_pod = s.leaves_per_pod;
  const int64_t j = h % u;
  const int64_t pod_s = ls / per_pod, pod_d = ld / per_pod;
  const int64_t spine_s = pod_s * u + j;
  out.push_back(g_.leaf_up(ls, j));
  if (pod_s == pod_d) {
    out.push_back(g_.spine_down(spine_s, ld % per_pod));
    return;
  }
  const int64_t k = (h / u) % s.spine_up_ports;
  const int64_t core = j * s.spine_up_ports + k;
  out.push_back(g_.spine_up(spine_s, k));
  out.push_back(g_.core_down(core, pod_d));
  out.push_back(g_.spine_down(pod_d * u + j, ld % per_pod));
}

}  // namespace paralab::sim
