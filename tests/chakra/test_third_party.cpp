// Chakra traces paralab did not write: ASTRA-sim's 4-rank microbenchmarks
// (tests/data/chakra/README.md), read and simulated on a DGX H100. Each is one collective of
// 1 MiB over every rank: the replay must time it as the network model times that call alone
// (the closed form of the flow model on an idle network), and the time must be plausible for
// NVLink: above the launch latency, under 100 us.
#include <catch2/catch.hpp>

#include "chakra/chakra_import.hpp"
#include "chakra_test_util.hpp"
#include "sim/net/network_model.hpp"
#include "sim/replay/replay.hpp"

using namespace paralab;

TEST_CASE("ASTRA-sim's microbenchmark traces replay as one collective of every rank", "[chakra]") {
  const Topology topo = chakra::test::shipped("dgx-h100");
  const std::filesystem::path data = std::filesystem::path(PARALAB_SOURCE_DIR) / "tests/data/chakra";
  const std::pair<const char*, sim::CollKind> cases[] = {{"all_reduce", sim::CollKind::all_reduce},
                                                         {"all_gather", sim::CollKind::all_gather},
                                                         {"reduce_scatter", sim::CollKind::reduce_scatter},
                                                         {"all_to_all", sim::CollKind::all_to_all}};
  const Layout layout(1, 1, 4, 1, 4);
  sim::NetworkModel net(sim::network_view(topo, layout), layout);
  for (const auto& [name, kind] : cases) {
    INFO(name);
    const sim::replay::TraceSet set = chakra::read_chakra(data / name);
    REQUIRE(set.ranks.size() == 4);
    for (const auto& r : set.ranks) {
      REQUIRE(r.nodes.size() == 1);
      CHECK(r.nodes[0].kind == sim::replay::NodeKind::collective);
      CHECK(r.nodes[0].coll == kind);
      CHECK(r.nodes[0].comm_bytes == (1 << 20));
      CHECK(r.nodes[0].group.empty());
    }
    const sim::replay::ReplayResult res = sim::replay::replay(set, topo);
    const double alone = net.isolated_time_us(
        sim::CommRequest{kind, CollectiveAlgo::automatic, GroupKind::world, {0, 1, 2, 3}, 1 << 20, false});
    CHECK(res.step_us == Approx(alone).epsilon(1e-9));
    CHECK(res.step_us > topo.collectives.launch_lat_us);
    CHECK(res.step_us < 100);
    CHECK(res.critical_comm_us == Approx(res.step_us).epsilon(1e-12));
    for (const auto& r : res.ranks) CHECK(r.comm_us == Approx(res.step_us).epsilon(1e-12));
  }
}
