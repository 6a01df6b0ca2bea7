// paralab — tests of the cluster graph and routing (sim/net/topology_graph, routing).
#include <boost/graph/breadth_first_search.hpp>
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "net_test_util.hpp"
#include "sim/net/routing.hpp"
#include "sim/net/topology_graph.hpp"

using namespace paralab;
using namespace paralab::sim;
using namespace paralab::sim::test;

namespace {

// Hop distances from one vertex by Boost's breadth-first search: routes must be shortest.
std::vector<int64_t> bfs_hops(const TopologyGraph& g, VertexId src) {
  const auto& graph = g.graph();
  std::vector<int64_t> dist(boost::num_vertices(graph), -1);
  dist[src] = 0;
  boost::breadth_first_search(
      graph, src,
      boost::visitor(boost::make_bfs_visitor(boost::record_distances(
          boost::make_iterator_property_map(dist.begin(),
                                            boost::get(boost::vertex_index, graph)),
          boost::on_tree_edge()))));
  return dist;
}

bool crosses_class(const TopologyGraph& g, const std::vector<LinkId>& route, LinkClass c) {
  for (LinkId l : route)
    if (g.link(l).cls == c) return true;
  return false;
}

}  // namespace

TEST_CASE("net graph: a node is devices and a hub and NICs with links in both directions", "[net]") {
  const Topology t = make_topology(NetworkKind::none, 2, 64, 1.0, 8, 8);
  const TopologyGraph g(t, 1);
  // 8 devices + 1 NVSwitch, no NICs without a network.
  CHECK(boost::num_vertices(g.graph()) == 9);
  CHECK(g.links().size() == 16);
  for (size_t l = 0; l < g.links().size(); l += 2) {
    CHECK(g.link(l).src == g.link(l + 1).dst);
    CHECK(g.link(l).dst == g.link(l + 1).src);
  }
  // intra_link.lat_us is device-to-device through the switch: half per hop.
  CHECK(g.link(g.dev_to_hub(0)).lat_us == Approx(kNvlinkLatUs / 2));
  CHECK(g.link(g.dev_to_hub(0)).bw_gbps == Approx(kNvlinkGBps));
  CHECK_THROWS(TopologyGraph(t, 2));  // several nodes need a network
}

TEST_CASE("net graph: devices share NICs evenly in order", "[net]") {
  const Topology t = make_topology(NetworkKind::fat_tree, 2, 64, 1.0, 8, 4);
  const TopologyGraph g(t, 2);
  // device d uses NIC d * nics / devices
  CHECK(g.nic_of_local(0) == 0);
  CHECK(g.nic_of_local(1) == 0);
  CHECK(g.nic_of_local(2) == 1);
  CHECK(g.nic_of_local(7) == 3);
  CHECK(g.first_local_of_nic(3) == 6);
  CHECK(g.link(g.dev_to_nic(8 + 5)).dst == g.nic_vertex(1, 2));
}

TEST_CASE("net graph: leaf port split honours the oversubscription ratio", "[net]") {
  // down d + up ceil(d / o) <= radix, equal speeds: radix 48, 2:1 -> 32 down, 16 up.
  Topology t = make_topology(NetworkKind::fat_tree, 2, 48, 2.0);
  LeafPorts p = leaf_ports(t);
  CHECK(p.down == 32);
  CHECK(p.up == 16);
  CHECK(p.up_bw_gbps == Approx(kSwitchGBps));
  // radix 40, 1:1 -> 20/20; radix 40, 2:1 -> 26 down, 13 up (one port unused).
  t.network.radix = 40;
  t.network.oversubscription = 1.0;
  p = leaf_ports(t);
  CHECK((p.down == 20 && p.up == 20));
  t.network.oversubscription = 2.0;
  p = leaf_ports(t);
  CHECK((p.down == 26 && p.up == 13));
  // Uplinks twice as fast as NICs: half as many are needed for 1:1.
  t.network.oversubscription = 1.0;
  t.network.switch_link.bw_gbps = 2 * kNicGBps;
  p = leaf_ports(t);
  CHECK(p.down * kNicGBps == Approx(p.up * p.up_bw_gbps));
}

TEST_CASE("net graph: 2048 nodes x 8 GPUs as a 3-tier fat tree", "[net]") {
  const Topology t = make_topology(NetworkKind::fat_tree, 3, 64, 1.0);
  const TopologyGraph g(t, 2048);
  const FabricShape& s = g.shape();
  CHECK(s.levels == 3);
  CHECK(s.down_ports == 32);
  CHECK(s.leaves == 512);
  CHECK(s.leaves_per_pod == 32);
  CHECK(s.pods == 16);
  CHECK(s.spines == 512);
  CHECK(s.cores == 1024);
  // devices + NVSwitches + NICs + leaves + spines + cores
  CHECK(boost::num_vertices(g.graph()) == 16384 + 2048 + 16384 + 512 + 512 + 1024);
  CHECK(g.links().size() == 2 * (3 * 16384 + 512 * 32 + 512 * 32));
}

TEST_CASE("net routing: routes are shortest paths on the graph (Boost BFS)", "[net]") {
  for (const NetworkKind kind : {NetworkKind::fat_tree, NetworkKind::rail_optimized}) {
    const Topology t = make_topology(kind, 3, 8, 1.0);  // small radix: 3 tiers with 64 nodes
    const TopologyGraph g(t, 64);
    REQUIRE(g.shape().levels == 3);
    Router r(g);
    std::vector<LinkId> route;
    for (int64_t src : {0, 13, 77, 300}) {
      const auto dist = bfs_hops(g, g.device_vertex(src));
      for (int64_t dst = 0; dst < g.num_devices(); dst += 7) {
        route.clear();
        r.compute(src, dst, route);
        // Rail-optimized cross-rail routes take the PXN detour over NVLink (NCCL's choice,
        // not the shortest path); every other route is a shortest path.
        const bool pxn = kind == NetworkKind::rail_optimized && src / 8 != dst / 8 &&
                         src % 8 != dst % 8;
        if (pxn)
          CHECK(static_cast<int64_t>(route.size()) >= dist[g.device_vertex(dst)]);
        else
          CHECK(static_cast<int64_t>(route.size()) == dist[g.device_vertex(dst)]);
        // The route is connected and ends at the destination.
        VertexId at = g.device_vertex(src);
        for (LinkId l : route) {
          REQUIRE(g.link(l).src == at);
          at = g.link(l).dst;
        }
        CHECK(at == g.device_vertex(dst));
      }
    }
  }
}

TEST_CASE("net routing: D-mod-k spreads destinations evenly over a leaf's uplinks", "[net]") {
  const Topology t = make_topology(NetworkKind::fat_tree, 2, 64, 1.0);  // 32 down, 32 up
  const TopologyGraph g(t, 16);  // 128 NICs, 4 leaves
  Router r(g);
  std::map<LinkId, int> uses;
  // From one device on leaf 0 to the 32 NICs' devices of leaf 1: one uplink each.
  for (int64_t dst = 32; dst < 64; ++dst) {
    const auto& route = r.route(0, dst);
    const auto links = r.links(route);
    REQUIRE(links.size() == 6);  // pcie, nic, up, down, nic, pcie
    ++uses[links[2]];
  }
  CHECK(uses.size() == 32);
  for (const auto& [link, n] : uses) CHECK(n == 1);
  // Cached and deterministic.
  CHECK(r.cached_routes() == 32);
  CHECK(r.route(0, 40).offset == r.route(0, 40).offset);
}

TEST_CASE("net routing: rail-optimized keeps same-rail traffic off the spine", "[net]") {
  // 4 nodes per rail leaf (radix 8 -> 4 down, 4 up), 8 rails.
  const Topology rail = make_topology(NetworkKind::rail_optimized, 2, 8, 1.0);
  const TopologyGraph g(rail, 4);
  REQUIRE(g.shape().leaves == 8);
  Router r(g);
  std::vector<LinkId> route;
  r.compute(3, 2 * 8 + 3, route);  // node 0 GPU 3 -> node 2 GPU 3: same rail
  CHECK_FALSE(crosses_class(g, route, LinkClass::fabric));
  CHECK(route.size() == 4);  // pcie, nic -> rail leaf 3 -> nic, pcie
  route.clear();
  r.compute(3, 2 * 8 + 5, route);  // GPU 3 -> GPU 5: PXN over NVLink to GPU 5, then rail 5
  CHECK_FALSE(crosses_class(g, route, LinkClass::fabric));
  CHECK(crosses_class(g, route, LinkClass::intra));
  // The same pair on a fat tree of the same radix crosses a spine.
  const Topology fat = make_topology(NetworkKind::fat_tree, 2, 8, 1.0);
  const TopologyGraph gf(fat, 4);
  Router rf(gf);
  route.clear();
  rf.compute(3, 2 * 8 + 3, route);
  CHECK(crosses_class(gf, route, LinkClass::fabric));
}
