// paralab — the engine-facing network model: sharing, oversubscription, rails, symmetric
// copies and determinism (sim/net/network_model).
#include <catch2/catch.hpp>

#include "net_test_util.hpp"

using namespace paralab;
using namespace paralab::sim;
using namespace paralab::sim::test;

namespace {
constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kCrossLeafLatUs = 2 * kPcieLatUs + 2 * kNicLatUs + 2 * kSwitchLatUs;
}  // namespace

TEST_CASE("net model: two transfers through one NIC each get half", "[net]") {
  // Node 0 has one NIC shared by all 8 GPUs; two GPUs send N to node 1 at once.
  const Topology t = make_topology(NetworkKind::fat_tree, 2, 64, 1.0, 8, 1);
  const Layout layout(8, 1, 2, 1, 8);
  NetworkModel net(t, layout);
  const double N = 8 * kMiB;
  const double lat = kLaunchUs + kStepUs + 2 * kPcieLatUs + 2 * kNicLatUs;
  const uint64_t a = net.start(request(sim::CollKind::p2p, {0, 8}, static_cast<int64_t>(N)), 0.0);
  const uint64_t b = net.start(request(sim::CollKind::p2p, {1, 9}, static_cast<int64_t>(N)), 0.0);
  const auto done = run_to_idle(net);
  CHECK(done[a] == Approx(lat + N / (Bpus(kNicGBps) / 2)));
  CHECK(done[b] == done[a]);
}

TEST_CASE("net model: a call finishing early releases bandwidth (exact times)", "[net]") {
  const Topology t = make_topology(NetworkKind::fat_tree, 2, 64, 1.0, 8, 1);
  const Layout layout(8, 1, 2, 1, 8);
  NetworkModel net(t, layout);
  const double B = Bpus(kNicGBps);
  const double lat = kLaunchUs + kStepUs + 2 * kPcieLatUs + 2 * kNicLatUs;
  const double small = 1 * kMiB, big = 3 * kMiB;
  const uint64_t a = net.start(request(sim::CollKind::p2p, {0, 8}, static_cast<int64_t>(small)), 0);
  const uint64_t b = net.start(request(sim::CollKind::p2p, {1, 9}, static_cast<int64_t>(big)), 0);
  const auto done = run_to_idle(net);
  // Both at B/2 until the small one ends (2*small/B); then the big one alone at B.
  CHECK(done[a] == Approx(lat + 2 * small / B).epsilon(1e-12));
  CHECK(done[b] == Approx(lat + 2 * small / B + (big - small) / B).epsilon(1e-12));
}

TEST_CASE("net model: transfers on disjoint links do not slow each other", "[net]") {
  const Topology t = make_topology(NetworkKind::fat_tree, 2, 64, 1.0);  // 8 NICs per node
  const Layout layout(8, 1, 2, 1, 8);
  const double N = 8 * kMiB;
  const auto alone = simulate_one(t, layout, request(sim::CollKind::p2p, {0, 8}, (int64_t)N));
  NetworkModel net(t, layout);
  const uint64_t a = net.start(request(sim::CollKind::p2p, {0, 8}, (int64_t)N), 0);
  net.start(request(sim::CollKind::p2p, {1, 9}, (int64_t)N), 0);                    // other NIC
  net.start(request(sim::CollKind::all_reduce, iota_ranks(2, 4), (int64_t)N), 0);  // NVLink only
  CHECK(run_to_idle(net)[a] == alone);
}

TEST_CASE("net model: a 2:1 oversubscribed fat tree halves cross-leaf bandwidth", "[net]") {
  // 4 nodes x 8 NICs; 16 NICs per leaf. Every NIC of leaf 0 sends to a NIC of leaf 1.
  const Layout layout(8, 1, 4, 1, 8);
  const double N = 16 * kMiB;
  auto finish = [&](int64_t radix, double oversub) {
    const Topology t = make_topology(NetworkKind::fat_tree, 2, radix, oversub);
    NetworkModel net(t, layout);
    REQUIRE(net.graph().shape().down_ports == 16);
    std::vector<uint64_t> h;
    for (int64_t r = 0; r < 16; ++r)
      h.push_back(net.start(request(sim::CollKind::p2p, {r, r + 16}, (int64_t)N), 0));
    const auto done = run_to_idle(net);
    double last = 0;
    for (uint64_t x : h) last = std::max(last, done[x]);
    return last;
  };
  const double lat = kLaunchUs + kStepUs + kCrossLeafLatUs;
  const double full = finish(32, 1.0);  // 16 down, 16 up
  const double half = finish(24, 2.0);  // 16 down, 8 up
  CHECK(full == Approx(lat + N / Bpus(kNicGBps)));
  CHECK(half == Approx(lat + N / (Bpus(kNicGBps) / 2)));
}

TEST_CASE("net model: rail-optimized data-parallel rings never touch the spine", "[net]") {
  const Layout layout(8, 1, 4, 1, 8);
  const auto req = request(sim::CollKind::all_reduce, iota_ranks(3, 4, 8), 64 << 20,
                           CollectiveAlgo::ring, GroupKind::dp, true);
  auto fabric_bytes = [&](NetworkKind kind) {
    NetworkModel net(make_topology(kind, 2, 8, 1.0), layout);  // 4 nodes per leaf / rail
    net.start(req, 0);
    run_to_idle(net);
    return net.stats().link_bytes[static_cast<int>(LinkClass::fabric)];
  };
  CHECK(fabric_bytes(NetworkKind::rail_optimized) == 0.0);
  CHECK(fabric_bytes(NetworkKind::fat_tree) > 0.0);
}

TEST_CASE("net model: symmetric copies sharing leaf uplinks slow the representative", "[net]") {
  // 4:1 at the leaf (radix 20: 16 down, 4 up of 25 GB/s). DP groups {k, 8+k, 16+k, 24+k} for
  // tp rank k = 0..7: nodes 0,1 on leaf 0 and 2,3 on leaf 1, so each ring crosses the leaf
  // uplinks twice. D-mod-k sends copy k up uplink k mod 4: 8 copies on 4 uplinks = 2 per
  // uplink, so the bandwidth term doubles against one group alone.
  const Topology t = make_topology(NetworkKind::fat_tree, 2, 20, 4.0);
  const Layout layout(8, 1, 4, 1, 8);
  const double N = 256 * kMiB;
  auto req = request(sim::CollKind::all_reduce, iota_ranks(0, 4, 8), (int64_t)N, CollectiveAlgo::ring,
                     GroupKind::dp, false);
  NetworkModel probe(t, layout);
  REQUIRE(probe.graph().shape().up_ports == 4);
  const double lat = kLaunchUs + 2 * 3 * (kStepUs + kCrossLeafLatUs);
  const double one = simulate_one(t, layout, req) - lat;
  req.symmetric_copies = true;
  const double eight = simulate_one(t, layout, req) - lat;
  // Ring bandwidth term 2(n-1)/n N / B (Patarasuk & Yuan 2009), B = B_nic alone, B_nic / 2
  // with 2 copies per uplink.
  CHECK(one == Approx(2.0 * 3 / 4 * N / Bpus(kNicGBps)));
  CHECK(eight == Approx(2 * one));
  // With a non-blocking leaf (1:1, 32 uplinks) the copies use distinct uplinks: no slow-down.
  const Topology nb = make_topology(NetworkKind::fat_tree, 2, 32, 1.0);
  CHECK(simulate_one(nb, layout, req) - lat == Approx(one));
}

TEST_CASE("net model: pipeline send/recv and embedding copies are every (tp cp dp) translate", "[net]") {
  // Stages on nodes 0 and 1 with one NIC per node: the 8 tp copies of a stage-to-stage send
  // share the NIC, so the representative moves at B_nic / 8.
  const Topology t = make_topology(NetworkKind::fat_tree, 2, 64, 1.0, 8, 1);
  const Layout layout(8, 1, 1, 2, 8);
  const double N = 4 * kMiB;
  auto req = request(sim::CollKind::p2p, {0, 8}, (int64_t)N, CollectiveAlgo::automatic, GroupKind::pp,
                     true);
  const double lat = kLaunchUs + kStepUs + 2 * kPcieLatUs + 2 * kNicLatUs;
  CHECK(simulate_one(t, layout, req) == Approx(lat + N / (Bpus(kNicGBps) / 8)));
  NetworkModel net(t, layout);
  CHECK(net.isolated_time_us(req) == Approx(lat + N / (Bpus(kNicGBps) / 8)));
  // The tied-embedding group {first stage, last stage} repeats the same way: an all-reduce
  // of 2 ranks (ring: 2(n-1)/n N = N per edge) whose 8 copies share each node's NIC.
  const auto embd = request(sim::CollKind::all_reduce, {0, 8}, (int64_t)N, CollectiveAlgo::ring,
                            GroupKind::embd, true);
  CHECK(simulate_one(t, layout, embd) ==
        Approx(kLaunchUs + 2 * (kStepUs + 2 * kPcieLatUs + 2 * kNicLatUs) +
               N / (Bpus(kNicGBps) / 8)));
}

TEST_CASE("net model: the same sequence gives bit-identical times", "[net]") {
  const Topology t = make_topology(NetworkKind::fat_tree, 2, 16, 2.0);
  const Layout layout(8, 1, 4, 2, 8);
  auto run = [&] {
    NetworkModel net(t, layout);
    std::vector<double> times;
    std::vector<uint64_t> fin;
    double now = 0;
    for (int i = 0; i < 40; ++i) {
      const int64_t stage = i % 2;
      const int64_t base = stage * 32;
      net.start(request(sim::CollKind::all_reduce, iota_ranks(base, 8), 1 << (14 + i % 8),
                        CollectiveAlgo::automatic, GroupKind::tp, true),
                now);
      if (i % 3 == 0)
        net.start(request(sim::CollKind::all_reduce, iota_ranks(base + i % 8, 4, 8), 25 << 20,
                          CollectiveAlgo::automatic, GroupKind::dp, true),
                  now);
      if (i % 4 == 1)
        net.start(request(sim::CollKind::p2p, {i % 8, 32 + i % 8}, 8 << 20, CollectiveAlgo::automatic,
                          GroupKind::pp, true),
                  now);
      now += 37.5;
      while (net.next_completion_us() <= now) {
        fin.clear();
        net.advance(net.next_completion_us(), fin);
        for (size_t k = 0; k < fin.size(); ++k) times.push_back(net.now_us());
      }
    }
    for (;;) {
      const double t_next = net.next_completion_us();
      if (t_next == std::numeric_limits<double>::infinity()) break;
      fin.clear();
      net.advance(t_next, fin);
      for (size_t k = 0; k < fin.size(); ++k) times.push_back(net.now_us());
    }
    return std::make_pair(times, net.stats().resolves);
  };
  const auto a = run();
  const auto b = run();
  CHECK(a.first.size() == 40 + 14 + 10);
  CHECK(a.first == b.first);  // bitwise equal doubles
  CHECK(a.second == b.second);
}

TEST_CASE("net model: starting after the next completion reports it on the next advance", "[net]") {
  const Topology t = make_topology(NetworkKind::none);
  const Layout layout(8, 1, 1, 1, 8);
  NetworkModel net(t, layout);
  const uint64_t a = net.start(request(sim::CollKind::all_reduce, iota_ranks(0, 8), 1024), 0.0);
  const double ta = net.next_completion_us();
  const uint64_t b = net.start(request(sim::CollKind::all_reduce, iota_ranks(0, 8), 1024), 1e6);
  CHECK(net.next_completion_us() == 1e6);  // a finished meanwhile: reported now
  std::vector<uint64_t> fin;
  net.advance(1e6, fin);
  REQUIRE(fin.size() == 1);
  CHECK(fin[0] == a);
  CHECK(ta < 1e6);
  CHECK(run_to_idle(net).at(b) > 1e6);
  CHECK(net.active_calls() == 0);
  CHECK(net.stats().calls == 2);
  CHECK(net.stats().finished == 2);
}

TEST_CASE("net model: a host-side reduction adds (n-1)/n x bytes / reduce_gbps to reducing collectives only", "[net]") {
  // CollectiveSpec::reduce_gbps: the all-gather and the reduce-scatter of one buffer move the
  // same wire bytes; only the reduce-scatter (and the all-reduce) also combine (n-1)/n of it.
  Topology t = make_topology(NetworkKind::fat_tree, 2, 64, 1.0);
  const Layout layout(8, 1, 2, 1, 8);
  const double N = 4 * kMiB;
  auto time_of = [&](sim::CollKind k) {
    NetworkModel net(t, layout);
    return net.isolated_time_us(request(k, iota_ranks(0, 4), static_cast<int64_t>(N)));
  };
  const double ag0 = time_of(sim::CollKind::all_gather), rs0 = time_of(sim::CollKind::reduce_scatter), ar0 = time_of(sim::CollKind::all_reduce);
  t.collectives.reduce_gbps = 2.0;
  const double extra = 3.0 / 4.0 * N / Bpus(2.0);
  CHECK(time_of(sim::CollKind::all_gather) == ag0);
  CHECK(time_of(sim::CollKind::reduce_scatter) == Approx(rs0 + extra));
  CHECK(time_of(sim::CollKind::all_reduce) == Approx(ar0 + extra));
  // The event-driven call pays the same.
  NetworkModel net(t, layout);
  const uint64_t h = net.start(request(sim::CollKind::reduce_scatter, iota_ranks(0, 4), static_cast<int64_t>(N)), 0.0);
  CHECK(run_to_idle(net)[h] == Approx(rs0 + extra));
}
