// paralab — shared fixtures for the network tests: small hand-built topologies with round
// numbers, so every expected time can be written as a closed form.
#pragma once

#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "ir/layout.hpp"
#include "ir/topology.hpp"
#include "sim/net/network_model.hpp"

namespace paralab::sim::test {

// Units: GB/s (1e9 B/s = 1e3 B/us) and us. Efficiencies are 1 so capacities are the numbers.
constexpr double kNvlinkGBps = 240.0;  // device <-> NVSwitch
constexpr double kNvlinkLatUs = 2.0;   // device -> device through the NVSwitch (1 us per hop)
constexpr double kPcieGBps = 100.0;
constexpr double kPcieLatUs = 0.5;
constexpr double kNicGBps = 25.0;
constexpr double kNicLatUs = 1.0;
constexpr double kSwitchGBps = 25.0;
constexpr double kSwitchLatUs = 0.5;
constexpr double kLaunchUs = 5.0;
constexpr double kStepUs = 1.0;

inline double Bpus(double gbps) { return gbps * 1e3; }  // bytes per microsecond

inline Topology make_topology(NetworkKind kind = NetworkKind::fat_tree, int64_t levels = 2,
                              int64_t radix = 64, double oversub = 1.0, int64_t dpn = 8,
                              int64_t nics = 8) {
  Topology t;
  t.name = "test";
  t.node.devices_per_node = dpn;
  t.node.intra = IntraFabric::nvswitch;
  t.node.intra_link = LinkSpec{kNvlinkGBps, kNvlinkLatUs, 1.0};
  t.node.pcie = LinkSpec{kPcieGBps, kPcieLatUs, 1.0};
  t.node.nics_per_node = nics;
  t.node.nic = LinkSpec{kNicGBps, kNicLatUs, 1.0};
  t.network.kind = kind;
  t.network.levels = levels;
  t.network.radix = radix;
  t.network.oversubscription = oversub;
  t.network.switch_link = LinkSpec{kSwitchGBps, kSwitchLatUs, 1.0};
  t.collectives.launch_lat_us = kLaunchUs;
  t.collectives.step_lat_us = kStepUs;
  t.collectives.tree_max_bytes = 0;
  return t;
}

inline std::vector<int64_t> iota_ranks(int64_t first, int64_t n, int64_t stride = 1) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(first + i * stride);
  return v;
}

inline CommRequest request(CollKind kind, std::vector<int64_t> members, int64_t bytes,
                           CollectiveAlgo algo = CollectiveAlgo::automatic,
                           GroupKind group = GroupKind::world, bool symmetric = false) {
  CommRequest r;
  r.kind = kind;
  r.algo = algo;
  r.group = group;
  r.members = std::move(members);
  r.bytes = bytes;
  r.symmetric_copies = symmetric;
  return r;
}

// Runs the network until idle; returns each handle's finish time (indexed by handle).
inline std::vector<double> run_to_idle(NetworkModel& net) {
  std::vector<double> done;
  std::vector<uint64_t> fin;
  for (;;) {
    const double t = net.next_completion_us();
    if (t == std::numeric_limits<double>::infinity()) break;
    fin.clear();
    net.advance(t, fin);
    for (uint64_t h : fin) {
      if (done.size() <= h) done.resize(h + 1, -1.0);
      done[h] = net.now_us();
    }
  }
  return done;
}

// The time one call takes alone, started at t = 0 on a fresh model.
inline double simulate_one(const Topology& topo, const Layout& layout, const CommRequest& req) {
  NetworkModel net(topo, layout);
  const uint64_t h = net.start(req, 0.0);
  return run_to_idle(net).at(h);
}

}  // namespace paralab::sim::test
