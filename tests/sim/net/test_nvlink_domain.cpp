// paralab — NVLink domains across hosts (GB200 NVL72): the layout's node is the domain, a group
// inside it runs on NVLink and never touches a NIC, the same group on 4-GPU hosts without the
// domain crosses InfiniBand, and a bad domain size is refused naming the key.
#include <catch2/catch.hpp>

#include "ir/error.hpp"
#include "ir/step_ir.hpp"
#include "net_test_util.hpp"
#include "../../ir/test_util.hpp"

using namespace paralab;
using namespace paralab::sim;

namespace {

Scenario rack(const std::vector<std::string>& sets = {}) {
  return paralab::test::scenario_from(
      "[model]\npreset = \"tiny\"\n[training]\nglobal_batch_size = 144\n[parallel]\ntensor = 1\npipeline = 1\n"
      "[cluster]\ntopology = \"gb200-nvl72\"\nnodes = 36\n",
      sets);
}

// One 64 MiB all-reduce over ranks 0-15 (4 trays of 4) alone; its NIC bytes.
std::pair<double, double> all_reduce(const Scenario& s) {
  const StepIR ir = build_step_ir(s);
  NetworkModel net(network_view(s.topology, ir.layout), ir.layout);
  std::vector<int64_t> members;
  for (int64_t r = 0; r < 16; ++r) members.push_back(r);
  const uint64_t h = net.start(sim::test::request(sim::CollKind::all_reduce, members, 64 << 20), 0.0);
  const double t = sim::test::run_to_idle(net).at(h);
  return {t, net.stats().link_bytes[static_cast<size_t>(LinkClass::nic)]};
}

}  // namespace

TEST_CASE("an NVLink domain of 18 hosts is one network node", "[net][nvlink]") {
  const Scenario s = rack();
  CHECK(s.topology.node.devices_per_node == 4);
  CHECK(s.topology.node.nvlink_domain() == 72);
  CHECK(nvlink_domain_devices(s) == 72);
  const Layout L = layout_of(s);
  CHECK(L.devices_per_node() == 72);
  CHECK(L.node_of(0) == L.node_of(71));  // the rack
  CHECK(L.node_of(72) == 1);             // the next rack
  const Topology view = network_view(s.topology, L);
  CHECK(view.node.devices_per_node == 72);
  CHECK(view.node.nics_per_node == 72);  // every tray's NICs, one per GPU
}

TEST_CASE("a group across trays of a rack runs on NVLink, without the domain on InfiniBand", "[net][nvlink]") {
  const auto [nvlink_us, nvlink_nic_bytes] = all_reduce(rack());
  CHECK(nvlink_nic_bytes == 0);
  const auto [ib_us, ib_nic_bytes] = all_reduce(rack({"topology.node.nvlink_domain_gpus=0"}));
  CHECK(ib_nic_bytes > 0);
  // A tray's 4 NICs (4 x 50 GB/s, 0.9 efficient) against its GPUs' NVLink (900 GB/s, 0.76):
  // the ring's tray-to-tray steps run at about a quarter of NVLink speed.
  CHECK(ib_us > 2.5 * nvlink_us);
}

TEST_CASE("an NVLink domain must hold whole nodes", "[net][nvlink]") {
  try {
    rack({"topology.node.nvlink_domain_gpus=6"});
    FAIL("a domain of 6 over 4-GPU hosts was accepted");
  } catch (const ConfigError& e) {
    CHECK(e.key() == "node.nvlink_domain_gpus");
    CHECK(std::string(e.what()).find("multiple of devices_per_node") != std::string::npos);
  }
}
