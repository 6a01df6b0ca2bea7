// paralab — the network half of the simulator, as the event engine sees it.
//
// The engine replays one representative rank per pipeline stage; every communication op it
// reaches becomes start(request, now). The model turns the call into phases of flows on the
// cluster graph (collective algorithms, symmetric copies, routes: all cached per call shape),
// shares link bandwidth max-min fairly among all active flows, and reports when calls finish:
//
//   uint64_t h = net.start(req, now_us);
//   double t = net.next_completion_us();       // next network event (+inf when idle)
//   net.advance(t, finished);                  // handles of calls finished by t (may be empty:
//                                              // some events are internal phase boundaries)
//
// Time never goes backwards: start() and advance() take times >= the last one seen. Starting
// a call later than next_completion_us() is allowed; calls that finished meanwhile are
// reported by the next advance(). Deterministic: the same sequence of calls gives
// bit-identical times.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/layout.hpp"
#include "ir/scenario.hpp"
#include "ir/topology.hpp"
#include "sim/net/comm.hpp"
#include "sim/net/topology_graph.hpp"

namespace paralab::sim {

// The topology as the network model builds it for a layout: its node is the layout's node (an
// NVLink domain of several hosts, ir/step_ir.hpp nvlink_domain_devices, with every host's NICs;
// or fewer devices than a host holds, e.g. 2 ranks on a 4-core host).
Topology network_view(const Topology& topo, const Layout& layout);

class NetworkModel {
 public:
  // Builds the graph for ceil(layout.world() / devices_per_node) nodes of `topo`. `forced`
  // is SimulationConfig::collective_algorithm (automatic = choose per call as NCCL would).
  // `links` ([[variation.link]]): those NICs' links to the switch carry only that fraction of
  // their bandwidth; at 0 the NIC is down and routes avoid it (Router::set_down).
  NetworkModel(const Topology& topo, const Layout& layout,
               CollectiveAlgo forced = CollectiveAlgo::automatic,
               const std::vector<LinkVariation>& links = {});
  ~NetworkModel();
  NetworkModel(const NetworkModel&) = delete;
  NetworkModel& operator=(const NetworkModel&) = delete;

  // Starts a call at now_us (>= every earlier time given); returns its handle.
  uint64_t start(const CommRequest& req, double now_us);
  // Time of the next network event (a call finishing or an internal phase boundary).
  [[nodiscard]] double next_completion_us() const;
  // Moves the network to t_us and appends the handles of the calls finished by then.
  void advance(double t_us, std::vector<uint64_t>& finished);

  [[nodiscard]] CommStats stats() const;
  [[nodiscard]] double now_us() const;
  [[nodiscard]] size_t active_calls() const;

  // The algorithm a call would run ("ring", "tree", "hierarchical", "direct").
  std::string_view algorithm(const CommRequest& req);
  // The call's duration alone on an idle network (launch latency included): the closed form
  // the flow model reproduces when nothing else is running.
  double isolated_time_us(const CommRequest& req);

  [[nodiscard]] const TopologyGraph& graph() const;

  // Invariant checks (sim/net/invariants.hpp; default on in debug builds): link capacity after
  // every re-solve and the bytes of every finishing flow, in the flow solver. They only read
  // the state: results are bit-identical either way.
  void set_check_invariants(bool on);
  // Throws InternalError (a violated invariant) unless every call started has finished and
  // every flow has drained: the end of a step.
  void check_drained() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace paralab::sim
