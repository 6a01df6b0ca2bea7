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

namespace paralab::sim::detail {

// Engine::call_lat_us_'s index of (collective kind, group kind, phase).
inline constexpr size_t kCollKinds = 5, kPhases = 4;
static_assert(static_cast<size_t>(paralab::CollKind::broadcast) + 1 == kCollKinds &&
              static_cast<size_t>(Phase::optimizer) + 1 == kPhases);
inline size_t call_index(paralab::CollKind k, GroupKind g, Phase p) {
  return (static_cast<size_t>(k) * static_cast<size_t>(GroupKind::kCount) + static_cast<size_t>(g)) * kPhases +
         static_cast<size_t>(p);
}

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr uint32_t kNone = UINT32_MAX;

// What an event does: the op finishes, starts (after a dispatch or hand-off delay), its
// communication thread stops spinning and sleeps (CollectiveSpec::poll_spin_us), or (a CPU
// rank that owns its cores) that thread gives the rank's core back to compute.
enum class EventKind : uint8_t { finish, start, spin_end, core_back };
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
  std::vector<double> stall;  // us charged after the op to its successors (OpTiming::stall_us)
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
    bool begun = true;  // false: dispatched while communication held every core (rate 0)
  };
  std::vector<Running> running;
  int64_t held_sms = 0;
  double rate = 1.0;
  std::vector<uint16_t> holds;
  std::vector<uint64_t> ev_seq;
  // Shared cores (Engine::pool_): per op whether it holds a core of the node's pool or waits
  // for one, and until when a communication op's thread busy-polls (us; its call's end or the
  // end of its spin window, whichever is first).
  enum class Core : uint8_t { none, held, queued };
  std::vector<Core> core;
  std::vector<double> spin_until;
  std::vector<double> held_since;  // when a polling thread took its core (us)
  // Whether the stage's ranks are computing: a compute op running, or released by its stream
  // predecessor and about to start (Engine::node_busy_).
  bool computing = false;
  // Calls beside compute (Engine::call_beside_us_): the compute ops started and not finished
  // (a shared core's queue included), and when the last one finished (us).
  int64_t computing_ops = 0;
  double computed_until = -1;
  // Sleeping pollers (Engine::wake_): when each communication op was posted on this rank (us),
  // and whether the call's earliest member is modeled asleep by the time the last arrives
  // (CollectiveSpec::sync_drift: its arrival spread exceeds poll_spin_us).
  std::vector<double> posted;
  std::vector<uint8_t> early_asleep;
  // Contended calls (Engine::contend_): per op whether its collective started while another
  // group's or stage's poller on the node still spun (CollectiveSpec::contended_lat_us).
  std::vector<uint8_t> contended;
  // When this stage's compute stream last waited for a communication op (us): its ranks start
  // the next compute op together there, and drift apart from then on (CollectiveSpec::sync_drift).
  double synced_at = 0;
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
  // Rank-owned cores (rank_cores_): a communication op's thread takes its share of the
  // rank's cores from its wake-up, and gives it back compute_handoff_us after its call ends,
  // or when its spin window ends.
  int64_t comm_sms(uint32_t s, OpId op);
  bool hold_from_wake(uint32_t s, OpId op);
  void end_hold(uint32_t s, OpId op);
  // Shared cores (pool_).
  void set_computing(uint32_t s, bool on);
  [[nodiscard]] double pool_dispatch_us(uint32_t s) const;
  void yield_pollers(int64_t node, int64_t cores);
  void claim_core(uint32_t s, OpId op);
  void run_on_core(uint32_t s, OpId op);
  void release_core(uint32_t s, OpId op);
  void leave_core(uint32_t s, OpId op);
  int64_t collective_sms(uint32_t s, GroupKind g, const std::vector<int64_t>& members);
  void on_call_done(uint64_t handle);
  [[nodiscard]] double wake_delay_us(uint32_t s, OpId op) const;
  // contend_: record a posted communication op on its node / drop it when it ends; whether a
  // call of another group kind or stage on stage s's node was posted less than poll_spin_us
  // ago and is still in flight (engine_comm.cpp).
  void post_on_node(uint32_t s, OpId op);
  void end_on_node(uint32_t s, OpId op);
  [[nodiscard]] bool contended_now(uint32_t s, GroupKind g) const;
  // What collective `op` of stage s, ending now, waits beyond the fixed cost its network call
  // had (call_launch_us): its class's cost beside compute, and a contended call's (engine_comm.cpp).
  [[nodiscard]] double call_end_extra_us(uint32_t s, OpId op) const;
  double arrival_skew_us(uint32_t s, OpId id);
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
  // The calibrated fixed cost of collective `op`'s kind, group and phase (Calibration::calls),
  // if the topology has one (engine_comm.cpp).
  [[nodiscard]] std::optional<double> call_launch_us(const Op& op) const;
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
  bool slow_ = false;  // compute beside communication modeled (SMs or shared cores)
  bool rank_cores_ = false;  // CoreShare::Mode::rank_cores: a woken communication thread preempts compute
  std::optional<CoreShare> share_;
  std::optional<CorePool> pool_;  // CoreShare::Mode::node_cores
  // pool_: the dispatch gap by the node's computing ranks (Calibration::dispatch, dense: index
  // busy - 1; empty: dispatch_us), and per node the ranks computing now.
  std::vector<double> busy_dispatch_us_;
  std::vector<int64_t> node_busy_;
  // pool_: a polling thread keeps a core this long once a claim waits (CollectiveSpec::
  // poll_yield_us; yield_ when shorter than the spin window), and per node the polling
  // threads holding a core, the earliest first.
  double yield_us_ = 0;
  bool yield_ = false;
  std::vector<std::vector<std::pair<uint32_t, OpId>>> pollers_;
  bool wake_ = false;  // CollectiveSpec::wake_us and poll_spin_us both set: pollers go to sleep
  // CollectiveSpec::contended_lat_us and poll_spin_us both set: per node the communication
  // ops posted and not yet ended, and each stage's node (its representative's).
  struct Posted {
    uint32_t stage;
    OpId op;
    GroupKind group;
    double at_us;
  };
  bool contend_ = false;
  std::vector<std::vector<Posted>> posted_on_node_;
  // Calibration::calls, dense over (collective kind, group kind, phase): the fixed cost per
  // call in us, NaN where the topology has none (empty: it has none at all).
  std::vector<double> call_lat_us_;
  // Likewise CallPoint::beside_lat_us: a call's fixed cost where its rank computed during it.
  std::vector<double> call_beside_us_;
  std::vector<int64_t> stage_node_;
  // DeviceSpec::dispatch_us, stream_handoff_us, compute_handoff_us.
  double dispatch_us_ = 0, handoff_us_ = 0, compute_handoff_us_ = 0;
  double on_core_us_ = 0;  // DeviceSpec::handoff_on_core_us (rank_cores_ only)
  double tail_ = 0;                           // DeviceSpec::compute_tail
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
