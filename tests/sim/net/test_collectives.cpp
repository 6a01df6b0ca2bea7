// paralab — collective algorithms on the network: closed forms (sim/net/collective_*).
#include <catch2/catch.hpp>
#include <cmath>

#include "net_test_util.hpp"
#include "sim/net/collective.hpp"

using namespace paralab;
using namespace paralab::sim;
using namespace paralab::sim::test;

namespace {
constexpr double kMiB = 1024.0 * 1024.0;
// Inter-node path latencies on make_topology(): device -> NIC -> leaf (-> spine -> leaf) ->
// NIC -> device.
constexpr double kSameLeafLatUs = 2 * kPcieLatUs + 2 * kNicLatUs;
constexpr double kCrossLeafLatUs = kSameLeafLatUs + 2 * kSwitchLatUs;
}  // namespace

TEST_CASE("net collectives: ring all-reduce on one NVSwitch node matches 2(n-1)/n N/B", "[net]") {
  // Patarasuk & Yuan (JPDC 2009) / NCCL ring: T = launch + 2(n-1)(step + a) + 2(n-1)/n N / B,
  // a = device-to-device latency through the NVSwitch.
  const Topology t = make_topology(NetworkKind::none);
  const Layout layout(8, 1, 1, 1, 8);
  const double N = 64 * kMiB;
  for (int64_t n : {2, 4, 8}) {
    const auto req = request(sim::CollKind::all_reduce, iota_ranks(0, n), static_cast<int64_t>(N),
                             CollectiveAlgo::ring);
    const double nd = static_cast<double>(n);
    const double expected = kLaunchUs + 2 * (nd - 1) * (kStepUs + kNvlinkLatUs) +
                            2 * (nd - 1) / nd * N / Bpus(kNvlinkGBps);
    CHECK(simulate_one(t, layout, req) == Approx(expected).epsilon(0.01));
  }
}

TEST_CASE("net collectives: ring all-reduce across nodes matches its closed form", "[net]") {
  const Topology t = make_topology(NetworkKind::fat_tree, 2, 64, 1.0);  // 32 NICs per leaf
  const double N = 256 * kMiB;
  SECTION("n = 8, one GPU per node: one channel, NIC-bound") {
    const Layout layout(8, 1, 8, 1, 8);  // dp group of rank 0: GPU 0 of nodes 0..7
    for (bool sym : {false, true}) {     // the 8 tp-rank copies use 8 different NICs
      const auto req = request(sim::CollKind::all_reduce, iota_ranks(0, 8, 8),
                               static_cast<int64_t>(N), CollectiveAlgo::ring, GroupKind::dp, sym);
      // nodes 0-3 on leaf 0, 4-7 on leaf 1: the slowest edge crosses the spine.
      const double expected = kLaunchUs + 2 * 7 * (kStepUs + kCrossLeafLatUs) +
                              2.0 * 7 / 8 * N / Bpus(kNicGBps);
      CHECK(simulate_one(t, layout, req) == Approx(expected).epsilon(0.01));
    }
  }
  SECTION("n = 16 on 2 nodes: 8 channels, one per NIC, bandwidth aggregates") {
    const Layout layout(16, 1, 1, 1, 8);
    const auto req = request(sim::CollKind::all_reduce, iota_ranks(0, 16), static_cast<int64_t>(N),
                             CollectiveAlgo::ring);
    // Each channel's ring leaves a node through a different NIC: busbw = 8 * B_nic (NVLink
    // carries 7 of 8 channels per GPU: 240/7 > 25, not the bottleneck).
    const double expected = kLaunchUs + 2 * 15 * (kStepUs + kSameLeafLatUs) +
                            2.0 * 15 / 16 * N / (8 * Bpus(kNicGBps));
    CHECK(simulate_one(t, layout, req) == Approx(expected).epsilon(0.01));
  }
}

TEST_CASE("net collectives: ring all-gather and reduce-scatter and broadcast match their closed forms", "[net]") {
  const Topology t = make_topology(NetworkKind::none);
  const Layout layout(8, 1, 1, 1, 8);
  const double N = 32 * kMiB;
  const double B = Bpus(kNvlinkGBps), a = kStepUs + kNvlinkLatUs;
  // NCCL docs / nccl-tests PERFORMANCE.md: all-gather and reduce-scatter move (n-1)/n N per
  // rank in n-1 steps; a pipelined chain broadcast moves N per edge in n-1 steps.
  const auto ag = request(sim::CollKind::all_gather, iota_ranks(0, 8), static_cast<int64_t>(N));
  CHECK(simulate_one(t, layout, ag) == Approx(kLaunchUs + 7 * a + 7.0 / 8 * N / B));
  const auto rs = request(sim::CollKind::reduce_scatter, iota_ranks(0, 8), static_cast<int64_t>(N));
  CHECK(simulate_one(t, layout, rs) == Approx(kLaunchUs + 7 * a + 7.0 / 8 * N / B));
  const auto bc = request(sim::CollKind::broadcast, {3, 0, 1, 2, 4, 5, 6, 7}, static_cast<int64_t>(N));
  CHECK(simulate_one(t, layout, bc) == Approx(kLaunchUs + 7 * a + N / B));
}

// nn.DataParallel's rooted collectives (docs/dataparallel.md). A ring reduce is the broadcast's
// chain toward the root (NCCL's ring reduce): N per edge in n-1 steps. Gather and scatter are
// every other member's N/n to or from the root at once: (n-1)/n N through the root's link.
TEST_CASE("net collectives: reduce, gather and scatter match their closed forms", "[net][dataparallel]") {
  const Topology t = make_topology(NetworkKind::none);
  const Layout layout(8, 1, 1, 1, 8);
  const double N = 32 * kMiB;
  const double B = Bpus(kNvlinkGBps), a = kStepUs + kNvlinkLatUs;
  const auto rd = request(sim::CollKind::reduce, {3, 0, 1, 2, 4, 5, 6, 7}, static_cast<int64_t>(N));
  CHECK(simulate_one(t, layout, rd) == Approx(kLaunchUs + 7 * a + N / B));
  for (sim::CollKind k : {sim::CollKind::gather, sim::CollKind::scatter}) {
    CAPTURE(sim::to_string(k));
    const auto r = request(k, {5, 0, 1, 2, 3, 4, 6, 7}, static_cast<int64_t>(N));
    CHECK(simulate_one(t, layout, r) == Approx(kLaunchUs + a + 7.0 / 8 * N / B));
  }
}

TEST_CASE("net collectives: send/recv and all-to-all match their closed forms", "[net]") {
  const Topology t = make_topology(NetworkKind::fat_tree, 2, 64, 1.0);
  const Layout layout(8, 1, 2, 1, 8);
  const double N = 16 * kMiB;
  // One transfer: launch + step + path latency + N / B_path (B_path = the NIC here).
  const auto p2p = request(sim::CollKind::p2p, {0, 8}, static_cast<int64_t>(N));
  CHECK(simulate_one(t, layout, p2p) ==
        Approx(kLaunchUs + kStepUs + kSameLeafLatUs + N / Bpus(kNicGBps)));
  // A transfer's own launch cost (CollectiveSpec::p2p_launch_lat_us) replaces launch_lat_us for
  // transfers only.
  Topology own = t;
  own.collectives.p2p_launch_lat_us = 40.0;
  CHECK(simulate_one(own, layout, p2p) == Approx(40.0 + kStepUs + kSameLeafLatUs + N / Bpus(kNicGBps)));
  // All-to-all over 16 GPUs on 2 nodes: every GPU sends N/16 to each of 8 remote peers
  // through its own NIC (8/16 N at B_nic) and to 7 local peers over NVLink (faster).
  const auto a2a = request(sim::CollKind::all_to_all, iota_ranks(0, 16), static_cast<int64_t>(N));
  CHECK(simulate_one(t, layout, a2a) ==
        Approx(kLaunchUs + kStepUs + kSameLeafLatUs + 8.0 / 16 * N / Bpus(kNicGBps)));
  CHECK(simulate_one(own, layout, a2a) == Approx(simulate_one(t, layout, a2a)));
}

TEST_CASE("net collectives: hierarchical all-reduce matches its closed form", "[net]") {
  // Jia et al. 2018: intra-node reduce-scatter, inter-node all-reduce of N/g over g parallel
  // rings, intra-node all-gather.
  const Topology t = make_topology(NetworkKind::fat_tree, 2, 64, 1.0);
  const Layout layout(8, 1, 4, 1, 8);
  const double N = 128 * kMiB;
  const double g = 8, m = 4;
  const auto req = request(sim::CollKind::all_reduce, iota_ranks(0, 32), static_cast<int64_t>(N),
                           CollectiveAlgo::hierarchical);
  const double intra = (g - 1) * (kStepUs + kNvlinkLatUs) + (g - 1) / g * N / Bpus(kNvlinkGBps);
  const double inter = 2 * (m - 1) * (kStepUs + kSameLeafLatUs) +
                       2 * (m - 1) / m * (N / g) / Bpus(kNicGBps);
  CHECK(simulate_one(t, layout, req) == Approx(kLaunchUs + 2 * intra + inter).epsilon(0.01));
  NetworkModel net(t, layout);
  CHECK(net.algorithm(req) == "hierarchical");
}

TEST_CASE("net collectives: tree all-reduce is 2N/B + 2 log2(nodes) alpha and wins small but loses large", "[net]") {
  // NCCL 2.4 double binary tree (Sanders et al. 2009): each node sends and receives ~2N in
  // total; latency grows with log2(nodes) instead of the ring's 2(n-1).
  const Topology t = make_topology(NetworkKind::fat_tree, 2, 64, 1.0);
  const Layout layout(8, 1, 32, 1, 8);
  const auto members = iota_ranks(0, 32, 8);  // GPU 0 of 32 nodes
  auto at = [&](double bytes, CollectiveAlgo algo) {
    return request(sim::CollKind::all_reduce, members, static_cast<int64_t>(bytes), algo,
                   GroupKind::dp);
  };
  const double small = 64 * 1024.0, large = 1024 * kMiB;
  const double ring_small = simulate_one(t, layout, at(small, CollectiveAlgo::ring));
  const double tree_small = simulate_one(t, layout, at(small, CollectiveAlgo::tree));
  const double ring_large = simulate_one(t, layout, at(large, CollectiveAlgo::ring));
  const double tree_large = simulate_one(t, layout, at(large, CollectiveAlgo::tree));
  CHECK(tree_small < ring_small);
  CHECK(ring_large < tree_large);
  // Bandwidth term of the tree: 2N / B_nic (within the 2-5% of imbalance of the shifted tree).
  CHECK(tree_large / (2 * large / Bpus(kNicGBps)) == Approx(1.0).epsilon(0.05));
  // Latency term: 2 * depth * (step + path latency); the in-order tree over 32 nodes has
  // depth floor(log2(32)) = 5 (its shifted twin too).
  const double depth = std::floor(std::log2(32.0));
  CHECK(tree_small - 2 * small / Bpus(kNicGBps) - kLaunchUs ==
        Approx(2 * depth * (kStepUs + kCrossLeafLatUs)).epsilon(0.05));
  // The automatic choice follows: tree below the crossover, ring above.
  NetworkModel net(t, layout);
  CHECK(net.algorithm(at(small, CollectiveAlgo::automatic)) == "tree");
  CHECK(net.algorithm(at(large, CollectiveAlgo::automatic)) == "ring");
  CHECK(simulate_one(t, layout, at(small, CollectiveAlgo::automatic)) == tree_small);
  CHECK(simulate_one(t, layout, at(large, CollectiveAlgo::automatic)) == ring_large);
  // One node: always the ring (NCCL's rings inside a node).
  CHECK(net.algorithm(request(sim::CollKind::all_reduce, iota_ranks(0, 8), 1024)) == "ring");
  // CollectiveSpec::tree_max_bytes overrides the model's crossover.
  Topology t2 = t;
  t2.collectives.tree_max_bytes = 1e12;
  NetworkModel net2(t2, layout);
  CHECK(net2.algorithm(at(large, CollectiveAlgo::automatic)) == "tree");
}

TEST_CASE("net collectives: forced algorithm from the scenario key with NCCL's fallback to ring", "[net]") {
  const Topology t = make_topology(NetworkKind::fat_tree, 2, 64, 1.0);
  const Layout layout(8, 1, 4, 1, 8);
  NetworkModel net(t, layout, CollectiveAlgo::tree);
  const auto ar = request(sim::CollKind::all_reduce, iota_ranks(0, 4, 8), 1 << 30);
  CHECK(net.algorithm(ar) == "tree");
  // Tree exists only for all-reduce (as in NCCL): other kinds fall back to their default.
  CHECK(net.algorithm(request(sim::CollKind::all_gather, iota_ranks(0, 4, 8), 1024)) == "ring");
  CHECK(net.algorithm(request(sim::CollKind::all_to_all, iota_ranks(0, 4, 8), 1024)) == "direct");
  // A per-call algorithm beats the model's setting.
  auto ring = ar;
  ring.algo = CollectiveAlgo::ring;
  CHECK(net.algorithm(ring) == "ring");
}

TEST_CASE("net collectives: double binary tree shape", "[net]") {
  // In-order tree over 0..m-1: inner nodes on odd indices, leaves on even ones, so the tree
  // shifted by one has its inner nodes where the first has leaves (Sanders et al. 2009).
  const auto t = inorder_tree(8);
  int roots = 0;
  for (int64_t i = 0; i < 8; ++i) {
    if (t[i] < 0) ++roots;
    bool inner = false;
    for (int64_t j = 0; j < 8; ++j) inner = inner || t[j] == i;
    CHECK(inner == (i % 2 == 1));
  }
  CHECK(roots == 1);
  CHECK(tree_depth(t) == 3);
  CHECK(tree_depth(inorder_tree(1)) == 0);
  CHECK(tree_depth(inorder_tree(32)) == 5);
}

TEST_CASE("net collectives: degenerate groups and NICs shared by two GPUs", "[net]") {
  const double N = 64 * kMiB;
  {
    // One member: nothing moves, the call costs its launch latency.
    const Topology t = make_topology(NetworkKind::none);
    const Layout layout(8, 1, 1, 1, 8);
    CHECK(simulate_one(t, layout, request(sim::CollKind::all_reduce, {5}, 1 << 20)) == kLaunchUs);
  }
  {
    // 4 NICs per 8 GPUs: 4 channels, one per NIC; each NIC carries one channel out and one in.
    const Topology t = make_topology(NetworkKind::fat_tree, 2, 64, 1.0, 8, 4);
    const Layout layout(16, 1, 1, 1, 8);
    const auto req = request(sim::CollKind::all_reduce, iota_ranks(0, 16), static_cast<int64_t>(N),
                             CollectiveAlgo::ring);
    const double expected = kLaunchUs + 2 * 15 * (kStepUs + kSameLeafLatUs) +
                            2.0 * 15 / 16 * N / (4 * Bpus(kNicGBps));
    CHECK(simulate_one(t, layout, req) == Approx(expected).epsilon(0.01));
  }
  {
    // A CPU host: 4 ranks on a shared-memory hub, no network.
    Topology t = make_topology(NetworkKind::none, 1, 2, 1.0, 4, 0);
    t.device.kind = DeviceKind::cpu;
    t.node.intra = IntraFabric::shm;
    t.node.intra_link = LinkSpec{4.0, 1.0, 1.0};
    const Layout layout(4, 1, 1, 1, 4);
    const auto req = request(sim::CollKind::all_reduce, iota_ranks(0, 4), 1 << 20);
    CHECK(simulate_one(t, layout, req) ==
          Approx(kLaunchUs + 6 * (kStepUs + 1.0) + 1.5 * (1 << 20) / Bpus(4.0)));
  }
}
