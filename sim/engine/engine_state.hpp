// paralab — the discrete-event engine's internal state (sim/engine/engine.cpp, engine_cores.cpp;
// semantics in engine.hpp, docs/simulator.md "Engine"): events, per-stage arrays and the Engine
// class. Included only by the engine's own sources; not part of the simulator's API.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <utility>
#include <vector>

#include "sim/engine/core_pool.hpp"
#include "sim/engine/core_share.hpp"
#include "sim/engine/engine.hpp"
#include "sim/engine/invariants.hpp"
#include "sim/engine/overhead.hpp"

namespace paralab::sim::detail {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr uint32_t kNone = UINT32_MAX;

// What an event does: the op finishes, or starts (after a dispatch or hand-off gap).
enum class EventKind : uint8_t { finish, start };
struct Event {
  double t;
  uint64_t seq;
  uint32_t stage;
  OpId op;
  EventKind kind = EventKind::finish;
};
struct EventLater {
  bool operator()(const Event& a, const Event& b) const { return a.t > b.t || (a.t == b.t && a.seq > b.seq); }
};

// Ops finished together when the last of `remaining` things happens (network calls, or
// arrivals of the stages of a cross-stage collective).
struct Join {
  uint32_t remaining = 0;
  uint32_t first = 0;  // into parts_
  uint32_t count = 0;
};

struct StageState {
  const StepGraph* g = nullptr;
  int64_t stage = 0, rank = 0;
  std::vector<double> dur;
  std::vector<uint32_t> waiting;
  std::vector<uint32_t> dep_begin;  // CSR of dependents: dependents[dep_begin[i] .. dep_begin[i+1])
  std::vector<OpId> dependents;
  std::vector<double> start, end;
  std::vector<double> posted;  // when the op was ready on this rank (a call: before its peers arrived)
  std::vector<OpOverhead> over;  // measured corrections per op (overhead.hpp); empty: none
  std::vector<uint8_t> done;
  std::vector<double> buffer_bytes;
  std::array<double, kMemCategories> live{};
  double live_total = 0;
  RankMemory mem;
  size_t finished = 0;
  // Per group kind: the representative's group members and a reusable request.
  std::array<std::vector<int64_t>, static_cast<size_t>(GroupKind::kCount)> members;
  std::array<bool, static_cast<size_t>(GroupKind::kCount)> have_members{};
  std::map<uint32_t, uint32_t> tag_seen;  // cross-stage collectives: occurrences per tag
  // Compute beside communication (Engine::slow_): compute ops in flight with the work they
  // have left at full speed, the SMs communication kernels hold, the resulting rate, and per
  // op the SMs its communication kernel holds (0: none now) and the sequence number of its
  // current completion event.
  struct Running {
    OpId op;
    double left_us, since_us;
  };
  std::vector<Running> running;
  int64_t held_sms = 0;
  double rate = 1.0;
  std::vector<uint16_t> holds;
  std::vector<uint64_t> ev_seq;
  // Shared cores (Engine::pool_): per compute op whether it holds a core of the node's pool or
  // waits for one.
  enum class Core : uint8_t { none, held, queued };
  std::vector<Core> core;
  std::array<int8_t, static_cast<size_t>(GroupKind::kCount)> intra_node{};  // per group kind: -1 unknown, 0/1
  // Invariant checks only (EngineOptions::check_invariants): how often each op started and
  // finished, and each buffer's lifecycle.
  std::vector<uint32_t> starts_n, finishes_n;
  std::vector<BufferState> buf_state;
};

class Engine {
 public:
  Engine(const StepIR& ir, const ComputeModel& compute, NetworkModel& net, const EngineOptions& opt)
      : ir_(ir), compute_(compute), net_(net), opt_(opt) {}

  EngineOutput run();

 private:
  void init_stage(StageState& st, int64_t stage);
  void make_ready(uint32_t s, OpId op);
  void finish(uint32_t s, OpId op);
  void schedule(uint32_t s, OpId op, double t) { heap_.push(Event{t, seq_++, s, op, EventKind::finish}); }
  // `op` has nothing left to wait for since now (the last thing it waited for was `after`).
  void release(uint32_t s, OpId op, OpId after);
  void start_compute(uint32_t s, OpId op);
  void start_comm(uint32_t s, OpId op);  // engine_comm.cpp
  bool stale(const Event& e) const;
  void compute_done(uint32_t s, OpId op);
  void hold_sms(uint32_t s, OpId op, int64_t sms);
  void release_sms(uint32_t s, OpId op);
  void set_rate(uint32_t s);
  // Shared cores (pool_): a compute op waits for a core of its node, then runs.
  void claim_core(uint32_t s, OpId op);
  void run_on_core(uint32_t s, OpId op);
  void release_core(uint32_t s, OpId op);
  int64_t collective_sms(uint32_t s, GroupKind g, const std::vector<int64_t>& members);
  void on_call_done(uint64_t handle);
  uint32_t new_join(uint32_t remaining) {
    joins_.push_back(Join{remaining, static_cast<uint32_t>(parts_.size()), 0});
    return static_cast<uint32_t>(joins_.size() - 1);
  }
  void add_part(uint32_t j, uint32_t s, OpId op) {
    parts_.emplace_back(s, op);
    ++joins_[j].count;
  }
  void bind(uint64_t handle, uint32_t j) {
    if (handle >= handle_join_.size()) handle_join_.resize(std::max<size_t>(handle + 1, handle_join_.size() * 2), kNone);
    handle_join_[handle] = j;
  }
  const std::vector<int64_t>& members(StageState& st, GroupKind g) {
    const auto gi = static_cast<size_t>(g);
    if (!st.have_members[gi]) {
      st.members[gi] = ir_.layout.members(g, st.rank);
      st.have_members[gi] = true;
    }
    return st.members[gi];
  }
  void collective_request(const Op& op, const std::vector<int64_t>& members);
  void start_collective(uint32_t s, OpId op, const CollectiveAttrs& c);
  void start_cross_stage(uint32_t s, OpId op, const CollectiveAttrs& c);
  void start_p2p(uint32_t s, OpId op, const P2PAttrs& p, bool is_send);
  void start_ring(uint32_t s, OpId op, const P2PAttrs& p);
  [[noreturn]] void report_deadlock() const;
  void check_end_of_step() const;

  const StepIR& ir_;
  const ComputeModel& compute_;
  NetworkModel& net_;
  EngineOptions opt_;
  bool slow_ = false;  // compute beside communication modeled (SMs, or a CPU rank's cores)
  std::optional<CoreShare> share_;
  std::optional<CorePool> pool_;  // CoreShare::Mode::node_cores
  bool corrected_ = false;        // the topology has a correction table (StageState::over)
  CollectiveSpec coll_;
  bool check_ = false;
  std::vector<StageState> stages_;
  std::priority_queue<Event, std::vector<Event>, EventLater> heap_;
  uint64_t seq_ = 0;
  double now_ = 0;
  double capacity_ = 0;
  int64_t events_ = 0;
  CommRequest req_;  // reused for every call (its member vector keeps its capacity)

  std::vector<Join> joins_;
  std::vector<std::pair<uint32_t, OpId>> parts_;
  std::vector<uint32_t> handle_join_;
  // Pipeline transfers waiting for their other side: tag -> (stage, op, is_send). Tags are
  // dense above kTagP2PBase (ir/stage_builder.cpp); others go to the map.
  struct Half {
    uint32_t stage = kNone;
    OpId op = 0;
    bool is_send = false;
  };
  std::vector<Half> p2p_dense_;
  std::map<uint32_t, Half> p2p_sparse_;
  // Cross-stage collectives waiting for stages: (tag, occurrence) -> arrivals so far.
  struct Arrivals {
    uint32_t expected = 0;
    std::vector<std::pair<uint32_t, OpId>> parts;
  };
  std::map<std::pair<uint32_t, uint32_t>, Arrivals> cross_;
};

}  // namespace paralab::sim::detail
