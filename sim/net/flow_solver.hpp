// paralab — flow-level network: max-min fair sharing of directed links, re-solved as flows
// start and finish.
//
// A flow is a set of transfers that move in lockstep at one rate r (bytes/us): a point-to-point
// message, one pipelined ring of a collective with all its edges, or one representative
// transfer standing for its symmetric copies. It loads each link l it crosses with a weight
// w_l (how many of its transfers, and of its symmetric copies, cross l, scaled by their size
// relative to the flow's), so the link constraint is  sum_f w_fl * r_f <= c_l.
//
// Rates are the weighted max-min fair allocation, found by progressive filling ("water
// filling", Bertsekas & Gallager, Data Networks, 2nd ed., Sec. 6.5.2): every unfrozen flow's
// rate rises together; the first link to fill freezes the flows crossing it; repeat. Here the
// fill level of a link is (c_l - frozen load) / (sum of unfrozen weights), and since that level
// never decreases as flows freeze, a lazy min-heap of links gives the next bottleneck.
//
// Only the connected component (flows linked through shared links) touched by a start or a
// finish is re-solved, lazily, once per timestamp, so one re-solve costs O(flows x path length)
// of that component, not of the cluster. Everything is deterministic: plain vectors, heaps
// ordered by (time, start sequence), no iteration over unordered containers.
#pragma once

#include <cstdint>
#include <limits>
#include <queue>
#include <span>
#include <vector>

#include "sim/net/invariants.hpp"
#include "sim/net/topology_graph.hpp"

namespace paralab::sim {

// Events closer than this are one event: times are sums of microsecond latencies and byte
// ratios, accurate to ~1e-15 relative, so 1e-12 relative (+1e-9 us absolute) only merges what
// is mathematically simultaneous.
inline double time_tie_eps(double t_us) { return 1e-9 + 1e-12 * (t_us < 0 ? -t_us : t_us); }

struct LinkLoad {
  LinkId link = 0;
  double weight = 1.0;  // rate multiplier on this link (> 0)
};

struct FinishedFlow {
  uint32_t id = 0;     // the id add() returned (reused after the flow finished)
  uint64_t tag = 0;    // the caller's tag
  double bytes = 0;    // the flow's size
};

struct SolverStats {
  uint64_t flows_added = 0;
  uint64_t flows_finished = 0;
  uint64_t settles = 0;       // timestamps at which something had to be re-solved
  uint64_t resolves = 0;      // connected components re-solved
  uint64_t flow_visits = 0;   // sum of the re-solved components' flow counts
  uint64_t load_visits = 0;   // sum of their (flow, link) loads: the work done
};

class FlowSolver {
 public:
  // capacity_Bpus[l]: capacity of directed link l in bytes per microsecond (1 GB/s = 1e3);
  // zero is allowed for links no flow will cross (add() rejects flows that would).
  explicit FlowSolver(std::vector<double> capacity_Bpus);

  // Starts a flow of `bytes` at now_us(). `loads` must stay valid until it finishes (they
  // live in the network model's pattern cache). A flow with no links or no bytes finishes at
  // once. Returns its id.
  uint32_t add(std::span<const LinkLoad> loads, double bytes, uint64_t tag);

  [[nodiscard]] double now_us() const { return now_us_; }
  // Time of the next flow completion, +inf when no flow is active.
  double next_completion_us();
  // Moves time to t_us, finishing (in time order, ties by start order) every flow that
  // completes at or before t_us, and re-solving after each completion.
  void advance(double t_us, std::vector<FinishedFlow>& finished);

  // Current rate (bytes/us) and remaining bytes of an active flow, for tests and traces.
  double rate_Bpus(uint32_t id);
  double remaining_bytes(uint32_t id);
  [[nodiscard]] size_t active_flows() const { return active_; }
  [[nodiscard]] const SolverStats& stats() const { return stats_; }

  // Invariant checks (sim/net/invariants.hpp): after every re-solve no link carries more than
  // its capacity; every finishing flow has delivered its bytes. They only read the state, so
  // results are bit-identical with them on or off. Default: on in debug builds.
  void set_check_invariants(bool on) { check_ = on; }
  [[nodiscard]] bool check_invariants() const { return check_; }

 private:
  struct Flow {
    const LinkLoad* loads = nullptr;
    uint32_t nloads = 0;
    uint32_t gen = 0;       // bumped when the slot is reused
    uint32_t version = 0;   // bumped when the rate changes (invalidates heap entries)
    bool alive = false;
    double bytes = 0;
    double remaining = 0;   // bytes left at t_update_us
    double rate = 0;        // bytes/us
    double t_update_us = 0;
    uint64_t seq = 0;       // start order, the deterministic tie-breaker
    uint64_t tag = 0;
  };
  struct Entry {            // a flow on a link's list (stale once gen differs)
    uint32_t slot, gen;
  };
  struct Done {
    double t_us;
    uint64_t seq;
    uint32_t slot, version;
    bool operator>(const Done& o) const { return t_us != o.t_us ? t_us > o.t_us : seq > o.seq; }
  };
  struct Fill {
    double level;
    LinkId link;
    bool operator>(const Fill& o) const {
      return level != o.level ? level > o.level : link > o.link;
    }
  };

  void settle();
  void collect_from_link(LinkId l);
  void collect_component();
  void solve_component();
  void set_rate(uint32_t slot, double rate);
  void finish(uint32_t slot, std::vector<FinishedFlow>& out);
  void drop_stale();
  void check_component_loads();
  [[nodiscard]] bool valid(const Done& d) const {
    return flows_[d.slot].alive && flows_[d.slot].version == d.version;
  }

  std::vector<double> cap_;
  std::vector<Flow> flows_;
  std::vector<uint32_t> free_;
  std::vector<std::vector<Entry>> link_flows_;
  size_t active_ = 0;
  uint64_t next_seq_ = 0;
  double now_us_ = 0;

  std::priority_queue<Done, std::vector<Done>, std::greater<>> done_;
  std::vector<Entry> dirty_flows_;
  std::vector<LinkId> dirty_links_;

  // Scratch for one re-solve, stamped with epoch_ instead of cleared.
  uint32_t epoch_ = 0;
  std::vector<uint32_t> link_mark_, flow_mark_, flow_frozen_;
  std::vector<double> frozen_load_, wsum_;
  std::vector<uint32_t> unfrozen_;
  std::vector<uint32_t> comp_flows_;
  std::vector<LinkId> comp_links_;
  std::vector<Fill> fill_heap_;

  SolverStats stats_;

  bool check_ = kCheckInvariantsByDefault;
  std::vector<double> check_load_;  // per link, zeroed over the component before each check
};

}  // namespace paralab::sim
