// paralab — building the cluster graph (see topology_graph.hpp and docs/network.md).
#include "sim/net/topology_graph.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "ir/error.hpp"

namespace paralab::sim {

std::string_view to_string(LinkClass c) {
  switch (c) {
    case LinkClass::intra: return "intra";
    case LinkClass::pcie: return "pcie";
    case LinkClass::nic: return "nic";
    case LinkClass::fabric: return "fabric";
  }
  return "?";
}

namespace {

// Switch links default to the NIC's speed when a topology leaves them out.
double switch_raw_bw(const Topology& t) {
  return t.network.switch_link.bw_gbps > 0 ? t.network.switch_link.bw_gbps : t.node.nic.bw_gbps;
}
double switch_eff_bw(const Topology& t) {
  return t.network.switch_link.bw_gbps > 0 ? t.network.switch_link.effective_bw_gbps()
                                           : t.node.nic.effective_bw_gbps();
}

void require_bw(double bw_gbps, const char* what, const Topology& t) {
  if (!(bw_gbps > 0))
    throw InternalError("topology '" + t.name + "': " + what +
                        " bandwidth must be > 0 for the network model");
}

}  // namespace

LeafPorts leaf_ports(const Topology& topo) {
  // The stated oversubscription is a bandwidth ratio, down:up. With uplinks of switch_bw and
  // NIC ports of nic_bw, u = ceil(d * nic_bw / (o * switch_bw)) uplinks are needed for d down
  // ports; take the largest d that fits the radix (ports left over stay unused), then scale
  // the uplink bandwidth so the ratio is exactly o (it is exact already whenever
  // d * nic_bw / (o * switch_bw) is an integer, e.g. equal speeds and radix divisible by 1+o).
  const double nic = topo.node.nic.bw_gbps;
  const double sw = switch_raw_bw(topo);
  const double o = std::max(topo.network.oversubscription, 1e-9);
  const int64_t radix = std::max<int64_t>(topo.network.radix, 2);
  LeafPorts p;
  for (int64_t d = radix - 1; d >= 1; --d) {
    const double need = static_cast<double>(d) * nic / (o * sw);
    const auto u = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(need - 1e-9)));
    if (d + u <= radix) {
      p.down = d;
      p.up = u;
      p.up_bw_gbps = switch_eff_bw(topo) * std::min(1.0, need / static_cast<double>(u));
      return p;
    }
  }
  p.down = 1;
  p.up = 1;
  p.up_bw_gbps = switch_eff_bw(topo) * std::min(1.0, nic / (o * sw));
  return p;
}

TopologyGraph::TopologyGraph(const Topology& topo, int64_t nodes)
    : nodes_(nodes), dpn_(topo.node.devices_per_node), nics_(topo.node.nics_per_node) {
  if (nodes_ < 1 || dpn_ < 1)
    throw InternalError("TopologyGraph: nodes and devices_per_node must be >= 1");
  if (nodes_ > 1 && topo.network.kind == NetworkKind::none)
    throw InternalError("topology '" + topo.name + "' has no network but " +
                        std::to_string(nodes_) + " nodes were requested");
  if (nodes_ > 1 && nics_ < 1)
    throw InternalError("topology '" + topo.name + "' has no NICs but " +
                        std::to_string(nodes_) + " nodes were requested");
  if (dpn_ > 1) require_bw(topo.node.intra_link.effective_bw_gbps(), "node.intra_link", topo);
  if (topo.network.kind != NetworkKind::none && nics_ > 0) {
    require_bw(topo.node.pcie.effective_bw_gbps(), "node.pcie", topo);
    require_bw(topo.node.nic.effective_bw_gbps(), "node.nic", topo);
  }
  build_nodes(topo);
  if (topo.network.kind != NetworkKind::none && nics_ > 0) build_fabric(topo);
}

VertexId TopologyGraph::add_vertex(VertexKind kind, int64_t node, int64_t index) {
  const auto v = static_cast<VertexId>(boost::add_vertex(
      VertexInfo{kind, static_cast<int32_t>(node), static_cast<int32_t>(index)}, g_));
  return v;
}

LinkId TopologyGraph::add_duplex(VertexId a, VertexId b, double bw_gbps, double lat_us,
                                 LinkClass cls) {
  const auto id = static_cast<LinkId>(links_.size());
  links_.push_back(Link{a, b, bw_gbps, lat_us, cls});
  links_.push_back(Link{b, a, bw_gbps, lat_us, cls});
  boost::add_edge(a, b, EdgeInfo{id}, g_);
  boost::add_edge(b, a, EdgeInfo{id + 1}, g_);
  return id;
}

VertexId TopologyGraph::hub_vertex(int64_t node) const {
  return hub0_ + static_cast<VertexId>(node);
}

VertexId TopologyGraph::nic_vertex(int64_t node, int64_t nic) const {
  return nic0_ + static_cast<VertexId>(node * nics_ + nic);
}

int64_t TopologyGraph::first_local_of_nic(int64_t nic) const {
  // Smallest local with local * nics / dpn == nic, i.e. ceil(nic * dpn / nics).
  return (nic * dpn_ + nics_ - 1) / nics_;
}

void TopologyGraph::build_nodes(const Topology& topo) {
  const bool with_nics = topo.network.kind != NetworkKind::none && nics_ > 0;
  const int64_t devs = nodes_ * dpn_;
  // Vertex ids are dense by role: devices [0, devs), hubs, NICs, then switches.
  for (int64_t n = 0; n < nodes_; ++n)
    for (int64_t d = 0; d < dpn_; ++d) add_vertex(VertexKind::device, n, d);
  hub0_ = static_cast<VertexId>(devs);
  for (int64_t n = 0; n < nodes_; ++n) add_vertex(VertexKind::hub, n, 0);
  nic0_ = static_cast<VertexId>(devs + nodes_);
  if (with_nics)
    for (int64_t n = 0; n < nodes_; ++n)
      for (int64_t i = 0; i < nics_; ++i) add_vertex(VertexKind::nic, n, i);

  // Device <-> hub: one link per device (NVSwitch: each GPU's NVLinks to the switch plane;
  // PCIe / shm: the device's share of the host bus). intra_link.lat_us is the device-to-device
  // latency through the hub, so each of the two hops carries half of it.
  const double intra_bw = topo.node.intra_link.effective_bw_gbps();
  const double intra_lat = topo.node.intra_link.lat_us / 2.0;
  dev_hub_.resize(static_cast<size_t>(2 * devs));
  for (int64_t dev = 0; dev < devs; ++dev) {
    const LinkId l = add_duplex(device_vertex(dev), hub_vertex(dev / dpn_), intra_bw, intra_lat,
                                LinkClass::intra);
    dev_hub_[2 * dev] = l;
    dev_hub_[2 * dev + 1] = l + 1;
  }
  if (!with_nics) return;
  // Device <-> its NIC over PCIe (GPUDirect RDMA path); devices sharing a NIC each have their
  // own PCIe link, the NIC's port is the shared resource.
  dev_nic_.resize(static_cast<size_t>(2 * devs));
  for (int64_t dev = 0; dev < devs; ++dev) {
    const int64_t node = dev / dpn_, local = dev % dpn_;
    const LinkId l = add_duplex(device_vertex(dev), nic_vertex(node, nic_of_local(local)),
                                topo.node.pcie.effective_bw_gbps(), topo.node.pcie.lat_us,
                                LinkClass::pcie);
    dev_nic_[2 * dev] = l;
    dev_nic_[2 * dev + 1] = l + 1;
  }
}

void TopologyGraph::build_fabric(const Topology& topo) {
  const NetworkSpec& net = topo.network;
  const int64_t total_nics = nodes_ * nics_;
  const bool rail = net.kind == NetworkKind::rail_optimized;
  const int64_t levels = std::clamp<int64_t>(net.levels, 1, 3);
  FabricShape& s = shape_;
  s.kind = net.kind;

  const LeafPorts lp = leaf_ports(topo);
  if (levels == 1) {
    // One switch (fat tree) or one switch per rail (a "rail-only" network: cross-rail traffic
    // must go through NVLink first, which routing does via PXN). Radix is not enforced here.
    s.down_ports = rail ? nodes_ : total_nics;
    s.up_ports = 0;
  } else {
    s.down_ports = lp.down;
    s.up_ports = lp.up;
    s.leaf_up_bw_gbps = lp.up_bw_gbps;
  }
  // Leaf of every NIC: fat tree fills leaves in NIC order; rail-optimized puts NIC i of the
  // nodes of one group (down_ports nodes) on that group's rail-i leaf.
  nic_leaf_idx_.resize(static_cast<size_t>(total_nics));
  nic_host_idx_.resize(static_cast<size_t>(total_nics));
  std::vector<int64_t> port(static_cast<size_t>(total_nics));
  for (int64_t n = 0; n < nodes_; ++n)
    for (int64_t i = 0; i < nics_; ++i) {
      const int64_t g = n * nics_ + i;
      const int64_t leaf = rail ? (n / s.down_ports) * nics_ + i : g / s.down_ports;
      port[g] = rail ? n % s.down_ports : g % s.down_ports;
      nic_leaf_idx_[g] = leaf;
      nic_host_idx_[g] = leaf * s.down_ports + port[g];
    }
  s.leaves = rail ? ((nodes_ + s.down_ports - 1) / s.down_ports) * nics_
                  : (total_nics + s.down_ports - 1) / s.down_ports;
  // A tier above is only built when some traffic needs it.
  s.levels = (s.leaves == 1 || levels == 1) ? 1 : levels;
  const int64_t radix = std::max<int64_t>(net.radix, 2);
  if (s.levels == 3) {
    s.leaves_per_pod = std::max<int64_t>(1, radix / 2);
    if (s.leaves <= s.leaves_per_pod) s.levels = 2;  // one pod: the cores would be idle
  }
  if (s.levels == 2) s.leaves_per_pod = s.leaves;
  s.pods = s.levels >= 2 ? (s.leaves + s.leaves_per_pod - 1) / s.leaves_per_pod : 1;
  s.spines = s.levels >= 2 ? s.pods * s.up_ports : 0;
  s.spine_up_ports = s.levels == 3 ? std::max<int64_t>(1, radix - s.leaves_per_pod) : 0;
  s.cores = s.levels == 3 ? s.up_ports * s.spine_up_ports : 0;

  std::vector<VertexId> leaf_v(static_cast<size_t>(s.leaves)), spine_v, core_v;
  for (int64_t l = 0; l < s.leaves; ++l) leaf_v[l] = add_vertex(VertexKind::leaf, -1, l);
  for (int64_t k = 0; k < s.spines; ++k) spine_v.push_back(add_vertex(VertexKind::spine, -1, k));
  for (int64_t c = 0; c < s.cores; ++c) core_v.push_back(add_vertex(VertexKind::core, -1, c));

  nic_leaf_.resize(static_cast<size_t>(2 * total_nics));
  for (int64_t g = 0; g < total_nics; ++g) {
    const LinkId l = add_duplex(nic_vertex(g / nics_, g % nics_), leaf_v[nic_leaf_idx_[g]],
                                topo.node.nic.effective_bw_gbps(), topo.node.nic.lat_us,
                                LinkClass::nic);
    nic_leaf_[2 * g] = l;
    nic_leaf_[2 * g + 1] = l + 1;
  }
  if (s.levels < 2) return;
  const double hop_lat = net.switch_link.lat_us;
  // Leaf <-> spine: leaf l of pod p has one uplink to each of the pod's u spines.
  leaf_up_.resize(static_cast<size_t>(s.leaves * s.up_ports));
  spine_down_.resize(static_cast<size_t>(s.spines * s.leaves_per_pod), 0);
  for (int64_t l = 0; l < s.leaves; ++l) {
    const int64_t pod = l / s.leaves_per_pod, pos = l % s.leaves_per_pod;
    for (int64_t k = 0; k < s.up_ports; ++k) {
      const int64_t sp = pod * s.up_ports + k;
      const LinkId id = add_duplex(leaf_v[l], spine_v[sp], s.leaf_up_bw_gbps, hop_lat,
                                   LinkClass::fabric);
      leaf_up_[l * s.up_ports + k] = id;
      spine_down_[sp * s.leaves_per_pod + pos] = id + 1;
    }
  }
  if (s.levels < 3) return;
  // Spine j of every pod joins core group j (spine_up_ports cores); a core has one port per
  // pod. Above the leaves the tree is non-blocking (full switch-link bandwidth).
  spine_up_.resize(static_cast<size_t>(s.spines * s.spine_up_ports));
  core_down_.resize(static_cast<size_t>(s.cores * s.pods));
  for (int64_t pod = 0; pod < s.pods; ++pod)
    for (int64_t j = 0; j < s.up_ports; ++j) {
      const int64_t sp = pod * s.up_ports + j;
      for (int64_t k = 0; k < s.spine_up_ports; ++k) {
        const int64_t c = j * s.spine_up_ports + k;
        const LinkId id = add_duplex(spine_v[sp], core_v[c], switch_eff_bw(topo), hop_lat,
                                     LinkClass::fabric);
        spine_up_[sp * s.spine_up_ports + k] = id;
        core_down_[c * s.pods + pod] = id + 1;
      }
    }
}

}  // namespace paralab::sim
