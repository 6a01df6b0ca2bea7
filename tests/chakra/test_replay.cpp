// Trace replay semantics on hand-built traces (sim/replay/replay.hpp), each against a closed
// form: compute queueing, transfers matched by (peer, tag), collectives matched by group and
// occurrence, the critical path, the roofline for nodes without a duration.
#include <catch2/catch.hpp>

#include "chakra_test_util.hpp"
#include "sim/net/network_model.hpp"
#include "sim/replay/replay.hpp"

using namespace paralab;
using namespace paralab::sim::replay;

namespace {

TraceNode comp(uint64_t id, double us, std::vector<uint64_t> deps = {}) {
  TraceNode n;
  n.id = id;
  n.kind = NodeKind::compute;
  n.duration_us = us;
  n.deps = std::move(deps);
  return n;
}

TraceNode p2p(uint64_t id, NodeKind k, int64_t peer, int64_t bytes, uint32_t tag, std::vector<uint64_t> deps = {}) {
  TraceNode n;
  n.id = id;
  n.kind = k;
  n.peer = peer;
  n.comm_bytes = bytes;
  n.tag = tag;
  n.deps = std::move(deps);
  return n;
}

TraceNode coll(uint64_t id, int64_t bytes, const std::string& group, std::vector<uint64_t> deps = {}) {
  TraceNode n;
  n.id = id;
  n.kind = NodeKind::collective;
  n.coll = sim::CollKind::all_reduce;
  n.comm_bytes = bytes;
  n.group = group;
  n.deps = std::move(deps);
  return n;
}

TraceSet set_of(std::vector<std::vector<TraceNode>> ranks) {
  TraceSet s;
  s.source = "test";
  for (size_t r = 0; r < ranks.size(); ++r)
    s.ranks.push_back(RankTrace{static_cast<int64_t>(r), "rank" + std::to_string(r), std::move(ranks[r])});
  return s;
}

// The call alone on an idle network of `world` ranks on `topo`.
double isolated_us(const Topology& topo, int64_t world, sim::CommRequest req) {
  const Layout layout(1, 1, world, 1, std::min<int64_t>(world, topo.node.nvlink_domain()));
  sim::NetworkModel net(sim::network_view(topo, layout), layout);
  req.symmetric_copies = false;
  return net.isolated_time_us(req);
}

}  // namespace

TEST_CASE("replay: compute nodes of a rank queue one at a time", "[chakra][replay]") {
  const Topology topo = chakra::test::shipped("dgx-h100");
  const ReplayResult r = replay(set_of({{comp(1, 10), comp(2, 5), comp(3, 1, {1})}}), topo);
  // 1 and 2 are ready at 0 and run one after the other; 3 waits for 1, then for the queue.
  CHECK(r.step_us == Approx(16).epsilon(1e-12));
  CHECK(r.critical_compute_us == Approx(16).epsilon(1e-12));
  CHECK(r.ranks[0].compute_us == Approx(16).epsilon(1e-12));
  CHECK(r.ranks[0].idle_us == Approx(0).margin(1e-9));
}

TEST_CASE("replay: a send and a receive matched by peer and tag", "[chakra][replay]") {
  const Topology topo = chakra::test::shipped("dgx-h100");
  const int64_t mib = 1 << 20;
  // Two transfers 0 -> 1 with tags 7 and 8, posted in opposite orders on the two sides.
  const TraceSet s = set_of({{comp(1, 10), p2p(2, NodeKind::send, 1, mib, 7, {1}), p2p(3, NodeKind::send, 1, mib, 8, {2})},
                             {p2p(1, NodeKind::recv, 0, mib, 8), p2p(2, NodeKind::recv, 0, mib, 7), comp(3, 5, {1, 2})}});
  const ReplayResult r = replay(s, topo);
  const double t = isolated_us(topo, 2, sim::CommRequest{sim::CollKind::p2p, CollectiveAlgo::automatic, GroupKind::pp, {0, 1}, mib});
  CHECK(r.step_us == Approx(10 + 2 * t + 5).epsilon(1e-9));
  CHECK(r.critical_compute_us + r.critical_comm_us + r.critical_wait_us == Approx(r.step_us).epsilon(1e-9));
  CHECK(r.ranks[1].idle_us == Approx(10).epsilon(1e-9));  // rank 1 waits for rank 0's compute
}

TEST_CASE("replay: collectives matched by group and occurrence", "[chakra][replay]") {
  const Topology topo = chakra::test::shipped("dgx-h100");
  const int64_t bytes = 64 << 20;
  // Group "1" = {0, 1}, group "2" = {2, 3}; rank 1 reaches its all-reduce 30 us late.
  TraceSet s = set_of({{coll(1, bytes, "1")},
                       {comp(1, 30), coll(2, bytes, "1", {1})},
                       {coll(1, bytes, "2"), coll(2, bytes, "2", {1})},
                       {coll(1, bytes, "2"), coll(2, bytes, "2", {1})}});
  s.groups = {{"1", {0, 1}}, {"2", {2, 3}}};
  const ReplayResult r = replay(s, topo);
  const double t = isolated_us(topo, 4, sim::CommRequest{sim::CollKind::all_reduce, CollectiveAlgo::automatic,
                                                         GroupKind::world, {0, 1}, bytes});
  // Group 2's two calls run back to back from 0, group 1's from 30 us, on separate links of
  // the NVSwitch node: the step ends at max(30 + t, 2 t).
  CHECK(r.step_us == Approx(std::max(30 + t, 2 * t)).epsilon(1e-9));
  CHECK(r.nodes_by_kind[static_cast<size_t>(NodeKind::collective)] == 6);
}

TEST_CASE("replay: a compute node without a duration is priced on the device", "[chakra][replay]") {
  const Topology topo = chakra::test::shipped("dgx-h100");
  TraceNode n;
  n.id = 1;
  n.kind = NodeKind::compute;
  n.flops = 1e12;
  n.bytes = 1e6;
  const DeviceSpec& d = topo.device;
  const double expect = 1e12 / (d.peak(MathMode::bf16) * 1e12 * d.gemm_max_efficiency) * 1e6 + d.launch_overhead_us;
  CHECK(priced_compute_us(n, d) == Approx(expect).epsilon(1e-12));
  CHECK(replay(set_of({{n}}), topo).step_us == Approx(expect).epsilon(1e-12));
}

TEST_CASE("replay: an unmatched receive names the rank and the node", "[chakra][replay]") {
  const Topology topo = chakra::test::shipped("dgx-h100");
  const TraceSet s = set_of({{comp(1, 1)}, {p2p(4, NodeKind::recv, 0, 100, 3)}});
  try {
    (void)replay(s, topo);
    FAIL("no error");
  } catch (const TraceError& e) {
    CHECK(e.node() == 4u);
    CHECK_THAT(e.what(), Catch::Contains("rank1") && Catch::Contains("cannot complete") && Catch::Contains("from rank 0"));
  }
}
