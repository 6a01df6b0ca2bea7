// paralab — the trace replay's internal state (replay.hpp): per-rank node arrays, the event
// heap, pending matches and network joins. Only replay*.cpp include it.
#pragma once

#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <queue>
#include <tuple>
#include <vector>

#include "sim/net/network_model.hpp"
#include "sim/replay/replay.hpp"

namespace paralab::sim::replay::detail {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

struct Ref {
  uint32_t rank = kNone, node = kNone;
};

struct NodeState {
  uint32_t waits = 0;      // dependencies not yet finished
  uint32_t occurrence = 0; // collectives: k-th of its group; p2p: k-th of its (peer, tag)
  double ready = 0, start = 0, end = 0;
  bool started = false, done = false;
  Ref released_by;         // for the critical path
};

struct RankState {
  const RankTrace* trace = nullptr;
  std::vector<NodeState> st;
  std::vector<uint32_t> child_begin, children;  // CSR of the reverse dependencies
  std::array<std::deque<uint32_t>, 2> queue;    // waiting compute: GPU, CPU
  std::array<uint32_t, 2> running{kNone, kNone};
  size_t finished = 0;
};

struct Event {
  double t;
  uint64_t seq;
  uint32_t rank, node;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

// Parties waiting for a call to start: collectives by (group, occurrence), transfers by
// (src, dst, tag, occurrence).
struct Pending {
  std::vector<Ref> parts;
  Ref last;  // the last to arrive
};

class Replayer {
 public:
  Replayer(const TraceSet& set, const Topology& topo, const ReplayOptions& opt);
  ReplayResult run();

 private:
  const TraceSet& set_;
  const Topology& topo_;
  const ReplayOptions& opt_;
  std::unique_ptr<NetworkModel> net_;
  std::vector<RankState> ranks_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> heap_;
  uint64_t seq_ = 0;
  double now_ = 0;
  int64_t events_ = 0;
  std::map<std::pair<std::string, uint32_t>, Pending> colls_;
  std::map<std::tuple<int64_t, int64_t, uint32_t, uint32_t>, Pending> p2p_;
  std::vector<std::vector<Ref>> joins_;  // by network handle: the nodes the call ends
  std::vector<int64_t> world_;
  CommRequest req_;

  void build(RankState& r);
  const TraceNode& node(Ref x) const { return ranks_[x.rank].trace->nodes[x.node]; }
  NodeState& state(Ref x) { return ranks_[x.rank].st[x.node]; }
  void schedule(Ref x, double t);
  void ready(Ref x, Ref by);
  void start_compute(Ref x, Ref by);
  void finish(Ref x);
  // replay_comm.cpp
  void arrive_collective(Ref x);
  void arrive_p2p(Ref x);
  void launch(const std::vector<Ref>& parts, Ref last, bool p2p);
  void on_call_done(uint64_t handle);
  [[noreturn]] void stuck() const;
  ReplayResult collect() const;
};

}  // namespace paralab::sim::replay::detail
