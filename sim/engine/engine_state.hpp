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
#include <tuple>
#include <utility>
#include <vector>

#include "sim/engine/core_pool.hpp"
#include "sim/engine/core_share.hpp"
#include "sim/engine/engine.hpp"
#include "sim/engine/invariants.hpp"
#include "sim/engine/overhead.hpp"
#include "sim/engine/rank_classes.hpp"

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

// What every unit of a stage shares: its buffers' sizes (bytes), the count each op waits for at
// the start (its deps plus its stream predecessor) and the reverse edges, CSR:
// dependents[dep_begin[i] .. dep_begin[i+1]).
struct GraphIndex {
  std::vector<double> buffer_bytes;  // per buffer
  std::vector<uint32_t> waiting0;
  std::vector<uint32_t> dep_begin;
  std::vector<OpId> dependents;
};

// One simulated rank: a stage's representative, or in per-rank mode a class of identical ranks
// (rank_classes.hpp; `cls` set). Indexed by unit in Engine::stages_.
struct StageState {
  const StepGraph* g = nullptr;
  int64_t stage = 0, rank = 0;
  const RankClass* cls = nullptr;
  const GraphIndex* idx = nullptr;  // the stage's (Engine::index_)
  // Shared cores (Engine::pool_): whether a compute op holds a core of the node's pool or
  // waits for one.
  enum class Core : uint8_t { none, held, queued };
  // Per op, together so that an event touches one cache line: its duration (compute, us), when
  // it started and ended, when it was ready on this rank (posted: a call before its peers
  // arrived), what it still waits for, whether it is done; beside communication (slow_) the SMs
  // its communication kernel holds (0: none now) and the sequence number of its current
  // completion event; with shared cores its core.
  struct OpState {
    double dur = 0, start = 0, end = 0, posted = 0;
    uint64_t ev_seq = 0;
    uint32_t pred_unit = kNone;  // what released it last (critical path): a dependency, or a call's
    OpId pred_op = 0;            // last arrival; kNone: nothing (it was ready at the start)
    uint32_t waiting = 0;
    uint16_t holds = 0;
    uint8_t done : 1 = 0;
    uint8_t comm : 1 = 0;  // a communication op (is_comm of its kind), kept here for the event loop
    Core core = Core::none;
  };
  std::vector<OpState> op;
  std::vector<OpOverhead> over;  // measured corrections per op (overhead.hpp); empty: none
  std::array<double, kMemCategories> live{};
  double live_total = 0;
  RankMemory mem;
  size_t finished = 0;
  // Per group kind: the representative's group members and a reusable request.
  std::array<std::vector<int64_t>, static_cast<size_t>(GroupKind::kCount)> members;
  std::array<bool, static_cast<size_t>(GroupKind::kCount)> have_members{};
  std::map<uint32_t, uint32_t> tag_seen;  // cross-stage collectives: occurrences per tag
  // Representative mode: per group kind joining stages, how many stages its group holds (0: not yet counted).
  std::array<uint32_t, static_cast<size_t>(GroupKind::kCount)> stages_in_group{};
  // Compute beside communication (Engine::slow_): compute ops in flight with the work they
  // have left at full speed, the SMs communication kernels hold and the resulting rate.
  struct Running {
    OpId op;
    double left_us, since_us;
  };
  std::vector<Running> running;
  int64_t held_sms = 0;
  double rate = 1.0;
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
  void init_stage(StageState& st, int64_t stage, const RankClass* cls);
  void critical_path(EngineOutput& out) const;  // engine.cpp
  const GraphIndex& graph_index(int64_t stage);              // built once per stage
  const std::vector<double>& base_durations(int64_t stage, uint32_t model);  // likewise per model
  // Per-rank mode: how many units must reach a call of group kind g before it starts (1: it
  // starts at once), the id of their group type, and whether the call stands for copies.
  uint32_t arrivals_needed(StageState& st, GroupKind g);
  uint32_t group_type(const StageState& st, GroupKind g) const { return st.cls ? st.cls->group_type[static_cast<size_t>(g)] : 0; }
  bool symmetric(const StageState& st, GroupKind g) const {
    return !st.cls || g == GroupKind::world || st.cls->groups_of_type[static_cast<size_t>(g)] > 1;
  }
  // Joins unit s's arrival at a call keyed `key`; true when this was the last one (the parts are
  // then in `parts`, the first arrival first).
  using ArrivalKey = std::tuple<uint8_t, uint32_t, uint32_t, uint32_t>;  // group kind, group type, tag or op, occurrence
  bool arrive(const ArrivalKey& key, uint32_t needed, uint32_t s, OpId op, std::vector<std::pair<uint32_t, OpId>>& parts);
  void launch_collective(uint32_t s, OpId op, const CollectiveAttrs& c, const std::vector<std::pair<uint32_t, OpId>>& parts);
  void launch_ring(const P2PAttrs& p, const std::vector<std::pair<uint32_t, OpId>>& parts);
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
  std::vector<const ComputeModel*> models_;  // by RankHardware::compute_model
  bool slow_ = false;  // compute beside communication modeled (SMs, or a CPU rank's cores)
  std::optional<CoreShare> share_;
  std::optional<CorePool> pool_;  // CoreShare::Mode::node_cores
  bool corrected_ = false;        // the topology has a correction table (StageState::over)
  CollectiveSpec coll_;
  bool check_ = false;
  std::vector<StageState> stages_;
  std::vector<GraphIndex> index_;  // per stage; empty until its first unit is set up
  std::map<std::pair<int64_t, uint32_t>, std::vector<double>> base_dur_;
  std::priority_queue<Event, std::vector<Event>, EventLater> heap_;
  uint64_t seq_ = 0;
  size_t total_ops_ = 0;
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
  // In per-rank mode (and for sparse tags) the map, keyed (tag << 32 | receiving unit).
  std::vector<Half> p2p_dense_;
  std::map<uint64_t, Half> p2p_sparse_;
  // Calls waiting for units (cross-stage collectives; in per-rank mode any call whose group
  // holds several units): key -> arrivals so far.
  struct Arrivals {
    uint32_t expected = 0;
    std::vector<std::pair<uint32_t, OpId>> parts;
  };
  std::map<ArrivalKey, Arrivals> cross_;
};

}  // namespace paralab::sim::detail
