// paralab — the cluster as a Boost.Graph graph: devices, the node's hub (NVSwitch, PCIe switch
// or shared-memory hub), NICs, and the switch fabric (fat tree of 1..3 tiers or rail-optimized).
// Every physical link is two directed edges (one per direction), each with its own capacity and
// latency, because the flow model shares bandwidth per direction (full-duplex links).
//
// Besides the Boost graph (the source of truth for inspection and for the tests that check
// routes against breadth-first shortest paths), the builder records the port tables routing
// needs: which link leaves a device towards its hub or NIC, which links a leaf has upwards, and
// which link a switch uses to reach a given child. Routing (routing.hpp) walks those ports.
// The fabric's construction rules are documented in docs/network.md ("The graph").
#pragma once

#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ir/topology.hpp"

namespace paralab::sim {

// hub = the node's NVSwitch, PCIe switch or shared-memory hub. leaf = tier-1 switch, spine =
// tier-2 switch (the aggregation switch of a pod in a 3-tier tree), core = tier-3 switch.
enum class VertexKind : uint8_t { device, hub, nic, leaf, spine, core };

// Link classes for statistics and tests: device<->hub, device<->NIC, NIC<->leaf,
// switch<->switch.
enum class LinkClass : uint8_t { intra, pcie, nic, fabric };
constexpr int kLinkClasses = 4;
std::string_view to_string(LinkClass c);

using VertexId = uint32_t;
using LinkId = uint32_t;

struct VertexInfo {
  VertexKind kind = VertexKind::device;
  int32_t node = -1;   // node index for device, hub, NIC; -1 for switches
  int32_t index = 0;   // local device / NIC index, or switch index within its tier
};
struct EdgeInfo {
  LinkId link = 0;     // index into TopologyGraph::links()
};
using NetGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, VertexInfo,
                                       EdgeInfo>;

// One direction of a physical link.
struct Link {
  VertexId src = 0, dst = 0;
  double bw_gbps = 0;  // effective bandwidth (LinkSpec::effective_bw_gbps()), 1e9 bytes/s
  double lat_us = 0;   // latency of one traversal
  LinkClass cls = LinkClass::intra;
};

// The switch fabric's dimensions, derived from NetworkSpec (docs/network.md, "The graph").
struct FabricShape {
  NetworkKind kind = NetworkKind::none;
  int64_t levels = 0;          // switch tiers actually built (0 when kind == none)
  int64_t down_ports = 0;      // d: NICs (fat tree) or nodes (rail) per leaf
  int64_t up_ports = 0;        // u: uplinks per leaf (one to each spine of its pod)
  int64_t leaves = 0;
  int64_t leaves_per_pod = 0;  // P: leaves under one set of u spines (3 tiers); = leaves for 2
  int64_t pods = 0;
  int64_t spine_up_ports = 0;  // uplinks per spine towards the cores (3 tiers)
  int64_t spines = 0, cores = 0;
  double leaf_up_bw_gbps = 0;  // effective bandwidth of one leaf uplink
};

class TopologyGraph {
 public:
  // Builds `nodes` nodes of `topo`. Throws InternalError for impossible inputs (several nodes
  // without a network or without NICs).
  TopologyGraph(const Topology& topo, int64_t nodes);

  [[nodiscard]] const NetGraph& graph() const { return g_; }
  [[nodiscard]] const std::vector<Link>& links() const { return links_; }
  [[nodiscard]] const Link& link(LinkId l) const { return links_[l]; }
  [[nodiscard]] const FabricShape& shape() const { return shape_; }
  [[nodiscard]] int64_t nodes() const { return nodes_; }
  [[nodiscard]] int64_t devices_per_node() const { return dpn_; }
  [[nodiscard]] int64_t nics_per_node() const { return nics_; }
  [[nodiscard]] int64_t num_devices() const { return nodes_ * dpn_; }

  // Vertices. `dev` is a global device index node * devices_per_node + local.
  [[nodiscard]] VertexId device_vertex(int64_t dev) const { return static_cast<VertexId>(dev); }
  [[nodiscard]] VertexId hub_vertex(int64_t node) const;
  [[nodiscard]] VertexId nic_vertex(int64_t node, int64_t nic) const;

  // Device d of a node uses NIC d * nics / devices (GPUs share NICs evenly, in order).
  [[nodiscard]] int64_t nic_of_local(int64_t local) const { return local * nics_ / dpn_; }
  // First local device attached to NIC `nic` (the PXN proxy for that rail).
  [[nodiscard]] int64_t first_local_of_nic(int64_t nic) const;

  // Port tables (link ids). dev = global device index; gnic = node * nics + nic.
  [[nodiscard]] LinkId dev_to_hub(int64_t dev) const { return dev_hub_[2 * dev]; }
  [[nodiscard]] LinkId hub_to_dev(int64_t dev) const { return dev_hub_[2 * dev + 1]; }
  [[nodiscard]] LinkId dev_to_nic(int64_t dev) const { return dev_nic_[2 * dev]; }
  [[nodiscard]] LinkId nic_to_dev(int64_t dev) const { return dev_nic_[2 * dev + 1]; }
  [[nodiscard]] LinkId nic_to_leaf(int64_t gnic) const { return nic_leaf_[2 * gnic]; }
  [[nodiscard]] LinkId leaf_to_nic(int64_t gnic) const { return nic_leaf_[2 * gnic + 1]; }
  [[nodiscard]] int64_t leaf_of_nic(int64_t gnic) const { return nic_leaf_idx_[gnic]; }
  // Destination index used by D-mod-k: leaf * down_ports + port on the leaf.
  [[nodiscard]] int64_t host_index(int64_t gnic) const { return nic_host_idx_[gnic]; }
  [[nodiscard]] LinkId leaf_up(int64_t leaf, int64_t k) const {
    return leaf_up_[leaf * shape_.up_ports + k];
  }
  // Spine s (global index) down to the leaf at position `pos` within the spine's pod.
  [[nodiscard]] LinkId spine_down(int64_t s, int64_t pos) const {
    return spine_down_[s * shape_.leaves_per_pod + pos];
  }
  [[nodiscard]] LinkId spine_up(int64_t s, int64_t k) const {
    return spine_up_[s * shape_.spine_up_ports + k];
  }
  [[nodiscard]] LinkId core_down(int64_t c, int64_t pod) const {
    return core_down_[c * shape_.pods + pod];
  }

 private:
  VertexId add_vertex(VertexKind kind, int64_t node, int64_t index);
  // Adds both directions; returns the id of a->b (b->a is the next id).
  LinkId add_duplex(VertexId a, VertexId b, double bw_gbps, double lat_us, LinkClass cls);
  void build_nodes(const Topology& topo);
  void build_fabric(const Topology& topo);

  NetGraph g_;
  std::vector<Link> links_;
  FabricShape shape_;
  int64_t nodes_ = 0, dpn_ = 0, nics_ = 0;
  VertexId hub0_ = 0, nic0_ = 0;
  std::vector<LinkId> dev_hub_, dev_nic_, nic_leaf_, leaf_up_, spine_down_, spine_up_,
      core_down_;
  std::vector<int64_t> nic_leaf_idx_, nic_host_idx_;
};

// The leaf's port split for a fat-tree tier (docs/network.md): the largest number of down
// ports d such that d + u <= radix with u = ceil(d * nic_bw / (oversub * switch_bw)) uplinks.
struct LeafPorts {
  int64_t down = 0, up = 0;
  double up_bw_gbps = 0;  // effective bandwidth of one uplink so that down:up == oversub
};
LeafPorts leaf_ports(const Topology& topo);

}  // namespace paralab::sim
