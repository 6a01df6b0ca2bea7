// paralab — routes on the cluster graph: which directed links a transfer from one device to
// another crosses. The rule (docs/network.md, "Routing"):
//  * same device: no links; same node: device -> hub -> device (NVSwitch, PCIe switch or
//    shared-memory hub);
//  * across nodes: device -> its NIC over PCIe -> leaf -> up/down the tree -> leaf -> NIC ->
//    device. Among equal uplinks the choice is destination-mod-k (D-mod-k, as OpenSM's
//    fat-tree routing engine does; Zahavi et al., "D-Mod-K Routing Providing Non-Blocking
//    Traffic for Shift Permutations on Real Life Fat Trees", 2010): with h the destination's
//    host index (leaf * down_ports + port), a leaf uses uplink h mod u and a spine uses uplink
//    (h / u) mod u2; the way down is unique in a tree;
//  * rail-optimized networks: when source and destination NICs sit on different rails the
//    transfer first moves over the hub to the source node's device on the destination's rail
//    and leaves through that device's NIC (NCCL's PXN, "PCI x NVLink", NCCL >= 2.12), so
//    inter-node traffic stays on one rail;
//  * a NIC that is down (set_down): traffic through it moves to the node's next NIC that is up,
//    over the hub to that NIC's first device (sending) or from it (receiving), as PXN does.
// Routes are deterministic and cached per (source, destination) device pair.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "sim/net/topology_graph.hpp"

namespace paralab::sim {

class Router {
 public:
  explicit Router(const TopologyGraph& graph);

  struct Route {
    uint32_t offset = 0, len = 0;  // into the route pool
    double lat_us = 0;             // sum of the links' latencies
  };
  // The route between two global device indices (node * devices_per_node + local), cached.
  // The reference stays valid for the router's lifetime.
  const Route& route(int64_t src_dev, int64_t dst_dev);
  [[nodiscard]] std::span<const LinkId> links(const Route& r) const {
    return {pool_.data() + r.offset, r.len};
  }
  // Computes a route without touching the cache (appends to `out`).
  void compute(int64_t src_dev, int64_t dst_dev, std::vector<LinkId>& out) const;

  // NIC `gnic` (node * nics_per_node + nic) is down; before any route is computed.
  void set_down(int64_t gnic);

  [[nodiscard]] const TopologyGraph& graph() const { return g_; }
  [[nodiscard]] size_t cached_routes() const { return cache_.size(); }

 private:
  void fabric(int64_t leaf_s, int64_t leaf_d, int64_t host_d, std::vector<LinkId>& out) const;
  // `nic` of `node` if it is up, else the node's next NIC that is up.
  [[nodiscard]] int64_t up_nic(int64_t node, int64_t nic) const;

  const TopologyGraph& g_;
  bool pxn_ = false;
  std::vector<uint8_t> down_;  // per global NIC; empty: all up
  std::unordered_map<uint64_t, Route> cache_;  // looked up only, never iterated
  std::vector<LinkId> pool_;
  std::vector<LinkId> scratch_;
};

}  // namespace paralab::sim
