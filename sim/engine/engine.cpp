// paralab — the discrete-event engine (semantics in engine.hpp, docs/simulator.md "Engine").
//
// Per stage the graph is flattened once into arrays: the compute model's durations, a count
// of what each op waits for (its deps plus its stream predecessor) and the reverse edges (CSR).
// An op whose count reaches zero starts at the current time. Compute ops schedule their
// completion in a binary heap of (time, sequence) events; communication ops become network
// calls whose completions the NetworkModel reports. The main loop takes whichever comes first
// (engine events first at equal times). Nothing is allocated per event beyond amortized vector
// growth; group member lists and call requests are built once per (stage, group kind).
//
// Compute beside communication: while communication kernels run on a rank they hold SMs
// (CollectiveSpec::intra_sms / inter_sms / p2p_sms), and the rank's compute ops progress at
// rate (SMs - held) / SMs of the compute model's speed. Each running compute op keeps the work
// it has left (in microseconds at full speed); when the held SMs change, its completion is
// rescheduled and the superseded heap event is skipped (its sequence number is no longer the
// op's). On a CPU host (DeviceKind::cpu) whose ranks each own their cores the same mechanism
// time-shares the rank's cores instead: rate = cores / (cores + busy communication threads)
// (core_share.hpp). With more ranks than the node has cores, the node's cores are a pool
// (core_pool.hpp): a compute op waits for a core, then runs at full speed; a posted call's
// thread holds a core while it busy-polls (CollectiveSpec::poll_spin_us). Without SMs or
// shared cores configured, compute durations are fixed.
#include "sim/engine/engine.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <string>

#include "ir/error.hpp"
#include "sim/engine/core_pool.hpp"
#include "sim/engine/core_share.hpp"
#include "sim/engine/invariants.hpp"

namespace paralab::sim {

double RankMemory::resident_total() const {
  double t = 0;
  for (double x : resident) t += x;
  return t;
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr uint32_t kNone = UINT32_MAX;

// What an event does: the op finishes, starts (after a dispatch or hand-off delay), or its
// communication thread stops spinning and sleeps (CollectiveSpec::poll_spin_us).
enum class EventKind : uint8_t { finish, start, spin_end };
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

sim::CollKind to_sim(paralab::CollKind k) {
  switch (k) {
    case paralab::CollKind::all_reduce: return sim::CollKind::all_reduce;
    case paralab::CollKind::all_gather: return sim::CollKind::all_gather;
    case paralab::CollKind::reduce_scatter: return sim::CollKind::reduce_scatter;
    case paralab::CollKind::all_to_all: return sim::CollKind::all_to_all;
    case paralab::CollKind::broadcast: return sim::CollKind::broadcast;
  }
  return sim::CollKind::all_reduce;
}

bool joins_stages(GroupKind g) { return g == GroupKind::embd || g == GroupKind::mp || g == GroupKind::world; }

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
  // Shared cores (Engine::pool_): per op whether it holds a core of the node's pool or waits
  // for one, and until when a communication op's thread busy-polls (us; its call's end or the
  // end of its spin window, whichever is first).
  enum class Core : uint8_t { none, held, queued };
  std::vector<Core> core;
  std::vector<double> spin_until;
  // Sleeping pollers (Engine::wake_): when each communication op was posted on this rank (us).
  std::vector<double> posted;
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
  bool stale(const Event& e) const;
  void compute_done(uint32_t s, OpId op);
  void hold_sms(uint32_t s, OpId op, int64_t sms);
  void release_sms(uint32_t s, OpId op);
  void set_rate(uint32_t s);
  // Shared cores (pool_).
  void claim_core(uint32_t s, OpId op);
  void run_on_core(uint32_t s, OpId op);
  void release_core(uint32_t s, OpId op);
  void leave_core(uint32_t s, OpId op);
  int64_t collective_sms(uint32_t s, GroupKind g, const std::vector<int64_t>& members);
  void on_call_done(uint64_t handle);
  [[nodiscard]] double wake_delay_us(uint32_t s, OpId op) const;
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
  std::optional<CoreShare> share_;
  std::optional<CorePool> pool_;  // CoreShare::Mode::node_cores
  bool wake_ = false;  // CollectiveSpec::wake_us and poll_spin_us both set: pollers go to sleep
  double dispatch_us_ = 0, handoff_us_ = 0;  // DeviceSpec::dispatch_us, stream_handoff_us
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

void Engine::init_stage(StageState& st, int64_t stage) {
  const StepGraph& g = ir_.stages[static_cast<size_t>(stage)];
  st.g = &g;
  st.stage = stage;
  st.rank = ir_.layout.representative(stage);
  const size_t n = g.ops.size();
  st.dur = compute_.durations(g);
  st.waiting.assign(n, 0);
  st.dep_begin.assign(n + 1, 0);
  // Stream predecessors count as dependencies (CUDA stream order).
  std::vector<OpId> next_on_stream(n, kNoOp);
  for (const auto& stream : g.streams)
    for (size_t i = 1; i < stream.size(); ++i) next_on_stream[stream[i - 1]] = stream[i];
  for (size_t i = 0; i < n; ++i) {
    const Op& op = g.ops[i];
    if (op.id != i) throw InternalError("engine: stage " + std::to_string(stage) + " op ids are not indexes");
    st.waiting[i] += static_cast<uint32_t>(op.deps.size());
    for (OpId d : op.deps) {
      if (d >= n) throw InternalError("engine: op " + op.full_name() + " depends on a missing op");
      ++st.dep_begin[d + 1];
    }
    if (next_on_stream[i] != kNoOp) {
      ++st.waiting[next_on_stream[i]];
      ++st.dep_begin[i + 1];
    }
  }
  for (size_t i = 0; i < n; ++i) st.dep_begin[i + 1] += st.dep_begin[i];
  st.dependents.assign(st.dep_begin[n], 0);
  std::vector<uint32_t> fill(st.dep_begin.begin(), st.dep_begin.end() - 1);
  for (size_t i = 0; i < n; ++i) {
    for (OpId d : g.ops[i].deps) st.dependents[fill[d]++] = static_cast<OpId>(i);
    if (next_on_stream[i] != kNoOp) st.dependents[fill[i]++] = next_on_stream[i];
  }
  st.start.assign(n, 0.0);
  st.end.assign(n, 0.0);
  st.done.assign(n, 0);
  st.buffer_bytes.resize(g.buffers.size());
  if (pool_) {
    st.core.assign(n, StageState::Core::none);
    st.spin_until.assign(n, 0.0);
  }
  if (wake_) st.posted.assign(n, 0.0);
  if (slow_) {
    st.holds.assign(n, 0);
    st.ev_seq.assign(n, 0);
    st.intra_node.fill(-1);
  }
  if (check_) {
    for (size_t i = 0; i < n; ++i) check_duration(stage, g.ops[i], st.dur[i]);
    st.starts_n.assign(n, 0);
    st.finishes_n.assign(n, 0);
    st.buf_state.assign(g.buffers.size(), BufferState::unallocated);
  }
  st.mem = RankMemory{};
  st.mem.rank = st.rank;
  st.mem.stage = stage;
  for (size_t b = 0; b < g.buffers.size(); ++b) {
    const Buffer& buf = g.buffers[b];
    st.buffer_bytes[b] = static_cast<double>(buf.bytes());
    if (buf.resident) st.mem.resident[static_cast<size_t>(buf.category)] += st.buffer_bytes[b];
  }
  if (st.mem.resident_total() > capacity_) {
    st.mem.over_capacity_us = 0.0;
    st.mem.over_capacity_op = n ? g.ops[0].id : 0;
  }
}

void Engine::make_ready(uint32_t s, OpId id) {
  StageState& st = stages_[s];
  const Op& op = st.g->ops[id];
  st.start[id] = now_;
  if (check_ && ++st.starts_n[id] > 1)
    invariant_violated("ops run once", "stage " + std::to_string(st.stage) + " op " + op.full_name() + " started twice");
  // Memory: allocations happen when the op starts (a transfer: when it is posted).
  if (!op.allocs.empty()) {
    for (BufferId b : op.allocs) {
      if (check_) check_buffer_transition(*st.g, b, st.buf_state[b], true, op, st.stage);
      const double bytes = st.buffer_bytes[b];
      st.live[static_cast<size_t>(st.g->buffers[b].category)] += bytes;
      st.live_total += bytes;
    }
    if (st.live_total > st.mem.peak_transient) {
      st.mem.peak_transient = st.live_total;
      st.mem.peak_time_us = now_;
      st.mem.peak_op = id;
      st.mem.at_peak = st.live;
      if (!st.mem.over_capacity_us && st.mem.resident_total() + st.live_total > capacity_) {
        st.mem.over_capacity_us = now_;
        st.mem.over_capacity_op = id;
      }
    }
  }
  if (wake_ && is_comm(op.kind)) st.posted[id] = now_;
  if (pool_ && share_->spin_us() > 0 && is_comm(op.kind)) claim_core(s, id);
  switch (op.kind) {
    case OpKind::collective: {
      const CollectiveAttrs& c = *op.collective();
      if (joins_stages(c.group)) start_cross_stage(s, id, c);
      else start_collective(s, id, c);
      return;
    }
    case OpKind::send: start_p2p(s, id, *op.p2p(), true); return;
    case OpKind::recv: start_p2p(s, id, *op.p2p(), false); return;
    case OpKind::sendrecv: start_ring(s, id, *op.p2p()); return;
    default: start_compute(s, id); return;
  }
}

void Engine::start_collective(uint32_t s, OpId id, const CollectiveAttrs& c) {
  StageState& st = stages_[s];
  const std::vector<int64_t>& m = members(st, c.group);
  if (m.size() < 2 || c.bytes <= 0) {  // nothing to exchange: done at once
    schedule(s, id, now_);
    return;
  }
  req_.kind = to_sim(c.kind);
  req_.algo = CollectiveAlgo::automatic;
  req_.group = c.group;
  req_.members.assign(m.begin(), m.end());
  req_.bytes = c.bytes;
  req_.symmetric_copies = true;
  const uint32_t j = new_join(1);
  add_part(j, s, id);
  bind(net_.start(req_, now_), j);
  if (slow_) hold_sms(s, id, collective_sms(s, c.group, m));
}

void Engine::start_cross_stage(uint32_t s, OpId id, const CollectiveAttrs& c) {
  StageState& st = stages_[s];
  const uint32_t occurrence = st.tag_seen[c.tag]++;
  const auto key = std::make_pair(c.tag, occurrence);
  auto it = cross_.find(key);
  if (it == cross_.end()) {
    // The stages whose representatives are in this group: each must reach the collective.
    std::vector<int64_t> stages;
    for (int64_t r : members(st, c.group)) stages.push_back(ir_.layout.stage_of(r));
    std::sort(stages.begin(), stages.end());
    stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
    it = cross_.emplace(key, Arrivals{static_cast<uint32_t>(stages.size()), {}}).first;
  }
  Arrivals& a = it->second;
  a.parts.emplace_back(s, id);
  if (a.parts.size() < a.expected) return;
  // Every stage has arrived: the call starts now, on the group of the first arrival.
  const uint32_t j = new_join(1);
  for (const auto& [ps, pop] : a.parts) {
    add_part(j, ps, pop);
    stages_[ps].start[pop] = now_;
  }
  const uint32_t a_first_stage = a.parts.front().first;
  const std::vector<int64_t>& m = members(stages_[a_first_stage], c.group);
  cross_.erase(it);
  if (m.size() < 2 || c.bytes <= 0) {  // finish every participant at once, as a call would
    const Join& jn = joins_[j];
    for (uint32_t i = 0; i < jn.count; ++i) schedule(parts_[jn.first + i].first, parts_[jn.first + i].second, now_);
    return;
  }
  req_.kind = to_sim(c.kind);
  req_.algo = CollectiveAlgo::automatic;
  req_.group = c.group;
  req_.members.assign(m.begin(), m.end());
  req_.bytes = c.bytes;
  req_.symmetric_copies = true;
  bind(net_.start(req_, now_), j);
  if (slow_) {
    const uint32_t first = a_first_stage;
    const int64_t sms = collective_sms(first, c.group, m);
    const Join& jn = joins_[j];
    for (uint32_t i = 0; i < jn.count; ++i) hold_sms(parts_[jn.first + i].first, parts_[jn.first + i].second, sms);
  }
}

void Engine::start_p2p(uint32_t s, OpId id, const P2PAttrs& p, bool is_send) {
  Half* slot = nullptr;
  if (p.tag >= kTagP2PBase && p.tag - kTagP2PBase < p2p_dense_.size()) slot = &p2p_dense_[p.tag - kTagP2PBase];
  else slot = &p2p_sparse_[p.tag];
  if (slot->stage == kNone) {
    *slot = Half{s, id, is_send};
    return;
  }
  const Half other = *slot;
  *slot = Half{};
  if (other.is_send == is_send)
    throw InternalError("engine: two " + std::string(is_send ? "sends" : "receives") + " share pipeline tag " +
                        std::to_string(p.tag));
  const uint32_t ss = is_send ? s : other.stage, rs = is_send ? other.stage : s;
  const OpId sop = is_send ? id : other.op, rop = is_send ? other.op : id;
  const Op& send_op = stages_[ss].g->ops[sop];
  const int64_t src = stages_[ss].rank;
  const int64_t dst = ir_.peer_of(src, send_op, true);
  if (dst != stages_[rs].rank)
    throw InternalError("engine: " + send_op.full_name() + " (stage " + std::to_string(ss) + ") goes to rank " +
                        std::to_string(dst) + " but its tag matches a receive on stage " + std::to_string(rs));
  if (check_) {
    const Op& recv_op = stages_[rs].g->ops[rop];
    check_transfer_sizes(send_op, send_op.p2p()->bytes, recv_op, recv_op.p2p()->bytes);
    if (ir_.peer_of(stages_[rs].rank, recv_op, false) != src)
      invariant_violated("bytes delivered", recv_op.full_name() + " (stage " + std::to_string(rs) +
                                                ") receives from another rank than " + send_op.full_name() + " sends from");
  }
  stages_[ss].start[sop] = now_;
  stages_[rs].start[rop] = now_;
  const uint32_t j = new_join(1);
  add_part(j, ss, sop);
  add_part(j, rs, rop);
  if (p.bytes <= 0) {
    schedule(ss, sop, now_);
    schedule(rs, rop, now_);
    return;
  }
  req_.kind = sim::CollKind::p2p;
  req_.algo = CollectiveAlgo::automatic;
  req_.group = p.group;
  req_.members.assign({src, dst});
  req_.bytes = p.bytes;
  req_.symmetric_copies = true;
  bind(net_.start(req_, now_), j);
  if (slow_) {
    hold_sms(ss, sop, coll_.p2p_sms);
    hold_sms(rs, rop, coll_.p2p_sms);
  }
}

void Engine::start_ring(uint32_t s, OpId id, const P2PAttrs& p) {
  StageState& st = stages_[s];
  const std::vector<int64_t>& m = members(st, p.group);
  const auto n = static_cast<int64_t>(m.size());
  const int64_t off = p.send_offset != 0 ? p.send_offset : -p.recv_offset;
  if (n < 2 || off % n == 0 || p.bytes <= 0) {
    schedule(s, id, now_);
    return;
  }
  // Every member sends to the one `off` ahead: one transfer per ring edge, each standing for
  // its copies in the other groups of the stage.
  const uint32_t j = new_join(static_cast<uint32_t>(n));
  add_part(j, s, id);
  for (int64_t i = 0; i < n; ++i) {
    req_.kind = sim::CollKind::p2p;
    req_.algo = CollectiveAlgo::automatic;
    req_.group = p.group;
    req_.members.assign({m[static_cast<size_t>(i)], m[static_cast<size_t>(((i + off) % n + n) % n)]});
    req_.bytes = p.bytes;
    req_.symmetric_copies = true;
    bind(net_.start(req_, now_), j);
  }
  if (slow_) hold_sms(s, id, coll_.p2p_sms);
}

void Engine::finish(uint32_t s, OpId id) {
  StageState& st = stages_[s];
  const Op& op = st.g->ops[id];
  st.end[id] = now_;
  st.done[id] = 1;
  if (slow_) {
    if (st.holds[id]) release_sms(s, id);
    else if (!is_comm(op.kind)) compute_done(s, id);
  }
  if (pool_) leave_core(s, id);
  if (check_ && ++st.finishes_n[id] > 1)
    invariant_violated("ops run once", "stage " + std::to_string(st.stage) + " op " + op.full_name() + " finished twice");
  for (BufferId b : op.frees) {
    if (check_) check_buffer_transition(*st.g, b, st.buf_state[b], false, op, st.stage);
    const double bytes = st.buffer_bytes[b];
    st.live[static_cast<size_t>(st.g->buffers[b].category)] -= bytes;
    st.live_total -= bytes;
  }
  ++st.finished;
  for (uint32_t e = st.dep_begin[id]; e < st.dep_begin[id + 1]; ++e) {
    const OpId d = st.dependents[e];
    if (--st.waiting[d] == 0) release(s, d, id);
  }
}

// Host-side dispatch (docs/simulator.md, "Dispatch and hand-offs"): the executor's worker for
// the op's stream starts it dispatch_us after its stream predecessor ended when that was the
// last thing it waited for, or stream_handoff_us after a dependency on another stream ended
// (that worker is woken). Both 0 (GPUs): the op starts now, as CUDA streams do.
// A collective or ring shift within the stage (tp, cp, dp) over more than one rank also waits
// CollectiveSpec::sync_skew_us for its last member (the members of a stage are identical here;
// on a shared host they are not). Collectives joining stages already wait for the stages.
void Engine::release(uint32_t s, OpId id, OpId after) {
  const StepGraph& g = *stages_[s].g;
  const Op& op = g.ops[id];
  double delay = op.stream == g.ops[after].stream ? dispatch_us_ : handoff_us_;
  if (coll_.sync_skew_us > 0 && (op.kind == OpKind::collective || op.kind == OpKind::sendrecv)) {
    const GroupKind gk = op.kind == OpKind::collective ? op.collective()->group : op.p2p()->group;
    if (within_stage(gk) && members(stages_[s], gk).size() > 1) delay += coll_.sync_skew_us;
  }
  if (delay > 0) heap_.push(Event{now_ + delay, seq_++, s, id, EventKind::start});
  else make_ready(s, id);
}

void Engine::on_call_done(uint64_t handle) {
  if (handle >= handle_join_.size() || handle_join_[handle] == kNone)
    throw InternalError("engine: the network reported an unknown call " + std::to_string(handle));
  const uint32_t j = handle_join_[handle];
  handle_join_[handle] = kNone;
  if (--joins_[j].remaining > 0) return;
  const Join jn = joins_[j];
  // A transfer's receive: how much later than now its thread sees the data (a send's
  // acknowledgement follows that).
  double recv_wake_us = 0;
  for (uint32_t i = 0; i < jn.count; ++i) {
    const auto [ps, pop] = parts_[jn.first + i];
    if (stages_[ps].g->ops[pop].kind == OpKind::recv) recv_wake_us = wake_delay_us(ps, pop);
  }
  for (uint32_t i = 0; i < jn.count; ++i) {
    const auto [ps, pop] = parts_[jn.first + i];
    // A send ends when its sender sees the receiver's acknowledgement (CollectiveSpec::
    // p2p_ack_us), after the receiver saw the data; other ops when their own thread sees the
    // call complete (CollectiveSpec::wake_us). The thread is idle meanwhile, so it stops
    // sharing the rank's cores now.
    const bool acked = coll_.p2p_ack_us > 0 && stages_[ps].g->ops[pop].kind == OpKind::send;
    const double later_us = acked ? recv_wake_us + coll_.p2p_ack_us : wake_delay_us(ps, pop);
    if (later_us > 0) {
      if (slow_ && stages_[ps].holds[pop]) release_sms(ps, pop);
      if (pool_) leave_core(ps, pop);
      schedule(ps, pop, now_ + later_us);
    } else {
      finish(ps, pop);
    }
  }
}

// A call that ends more than poll_spin_us after its rank posted it is seen when its sleeping
// poller next tests (and, on shared cores, runs): wake_us later (CollectiveSpec::wake_us).
double Engine::wake_delay_us(uint32_t s, OpId id) const {
  return wake_ && now_ - stages_[s].posted[id] > coll_.poll_spin_us ? coll_.wake_us : 0.0;
}

// --- Compute beside communication --------------------------------------------------------

void Engine::start_compute(uint32_t s, OpId id) {
  StageState& st = stages_[s];
  if (pool_) {
    claim_core(s, id);
    return;
  }
  if (!slow_) {
    schedule(s, id, now_ + st.dur[id]);
    return;
  }
  st.running.push_back(StageState::Running{id, st.dur[id], now_});
  st.ev_seq[id] = seq_;
  schedule(s, id, st.rate == 1.0 ? now_ + st.dur[id] : now_ + st.dur[id] / st.rate);
}

// A compute op's completion event is stale when the op was rescheduled after it was pushed.
bool Engine::stale(const Event& e) const {
  const StageState& st = stages_[e.stage];
  return !is_comm(st.g->ops[e.op].kind) && st.ev_seq[e.op] != e.seq;
}

void Engine::compute_done(uint32_t s, OpId id) {
  auto& run = stages_[s].running;
  for (size_t i = 0; i < run.size(); ++i)
    if (run[i].op == id) {
      run[i] = run.back();
      run.pop_back();
      return;
    }
}

// SMs a collective's kernel holds: NCCL's channels for a group within one node or across nodes.
int64_t Engine::collective_sms(uint32_t s, GroupKind g, const std::vector<int64_t>& m) {
  int8_t& intra = stages_[s].intra_node[static_cast<size_t>(g)];
  if (intra < 0) {
    const int64_t per_node = std::max<int64_t>(1, ir_.layout.devices_per_node());
    intra = 1;
    for (int64_t r : m)
      if (r / per_node != m.front() / per_node) intra = 0;
  }
  return intra ? coll_.intra_sms : coll_.inter_sms;
}

void Engine::hold_sms(uint32_t s, OpId id, int64_t sms) {
  if (sms <= 0) return;
  StageState& st = stages_[s];
  st.holds[id] = static_cast<uint16_t>(std::min<int64_t>(sms, UINT16_MAX));
  st.held_sms += st.holds[id];
  set_rate(s);
}

void Engine::release_sms(uint32_t s, OpId id) {
  StageState& st = stages_[s];
  st.held_sms -= st.holds[id];
  st.holds[id] = 0;
  set_rate(s);
}

// Compute progresses at the rate core_share.hpp gives for what communication holds (SMs left
// free, or a share of the rank's cores): every compute op in flight on the stage is
// rescheduled when it changes.
void Engine::set_rate(uint32_t s) {
  StageState& st = stages_[s];
  const double rate = share_->rate(st.held_sms);
  if (rate == st.rate) return;
  for (StageState::Running& r : st.running) {
    r.left_us = std::max(0.0, r.left_us - (now_ - r.since_us) * st.rate);
    r.since_us = now_;
    st.ev_seq[r.op] = seq_;
    schedule(s, r.op, now_ + r.left_us / rate);
  }
  st.rate = rate;
}

// --- Shared cores (core_pool.hpp) ----------------------------------------------------------

// A compute op, or a posted communication op's polling thread, asks its node for cores: as
// many as the stage has ranks there (they run it together), at most the node's.
void Engine::claim_core(uint32_t s, OpId id) {
  StageState& st = stages_[s];
  if (is_comm(st.g->ops[id].kind)) st.spin_until[id] = now_ + share_->spin_us();
  if (pool_->acquire(share_->node_of_stage(s), CorePool::Claim{s, id, share_->claim_cores(s)})) run_on_core(s, id);
  else st.core[id] = StageState::Core::queued;
}

// A claim was granted now. A compute op runs: when the stage's ranks on the node outnumber its
// cores they take turns, each at full speed, so the op holds the cores for ranks / cores times
// its duration and the representative's own turn is the last (its op starts that much later:
// what each rank measures is the op's duration, the turns before it are waiting). A polling
// thread spins until its window or its call ends, or gives the core straight back if that
// has passed.
void Engine::run_on_core(uint32_t s, OpId id) {
  StageState& st = stages_[s];
  st.core[id] = StageState::Core::held;
  if (is_comm(st.g->ops[id].kind)) {
    if (now_ >= st.spin_until[id]) release_core(s, id);
    else heap_.push(Event{st.spin_until[id], seq_++, s, id, EventKind::spin_end});
    return;
  }
  const double end = now_ + st.dur[id] * share_->turns(s);
  st.start[id] = end - st.dur[id];  // the executor's op begins once its thread runs
  schedule(s, id, end);
}

void Engine::release_core(uint32_t s, OpId id) {
  StageState& st = stages_[s];
  if (st.core[id] != StageState::Core::held) return;
  st.core[id] = StageState::Core::none;
  // Local: run_on_core may release again (a thread whose window passed while it waited).
  std::vector<CorePool::Claim> granted;
  pool_->release(share_->node_of_stage(s), share_->claim_cores(s), granted);
  for (const CorePool::Claim& c : granted) run_on_core(c.stage, c.op);
}

// The op is done with its core (a compute op ended, a call ended, or its op finished): it gives
// the core back if it holds one; a polling thread still queued gives it straight back when
// granted (its window now ends here).
void Engine::leave_core(uint32_t s, OpId id) {
  StageState& st = stages_[s];
  st.spin_until[id] = std::min(st.spin_until[id], now_);
  release_core(s, id);
}

void Engine::report_deadlock() const {
  std::string msg = "engine: the step cannot complete (dependency cycle or unmatched communication):";
  for (const StageState& st : stages_) {
    if (st.finished == st.g->ops.size()) continue;
    msg += "\n  stage " + std::to_string(st.stage) + ": " + std::to_string(st.g->ops.size() - st.finished) +
           " ops never ran; stream heads:";
    for (int s = 0; s < kStreams; ++s)
      for (OpId id : st.g->streams[static_cast<size_t>(s)])
        if (!st.done[id]) {
          msg += " " + std::string(to_string(static_cast<Stream>(s))) + "=" + st.g->ops[id].full_name() + " (waits for " +
                 std::to_string(st.waiting[id]) + ")";
          break;
        }
  }
  throw InternalError(msg);
}

void Engine::check_end_of_step() const {
  std::vector<std::string> unmatched;
  for (size_t i = 0; i < p2p_dense_.size(); ++i)
    if (p2p_dense_[i].stage != kNone)
      unmatched.push_back("pipeline tag " + std::to_string(kTagP2PBase + i) + " (" +
                          stages_[p2p_dense_[i].stage].g->ops[p2p_dense_[i].op].full_name() + ")");
  for (const auto& [tag, h] : p2p_sparse_)
    if (h.stage != kNone)
      unmatched.push_back("pipeline tag " + std::to_string(tag) + " (" + stages_[h.stage].g->ops[h.op].full_name() + ")");
  for (const auto& [key, a] : cross_)
    unmatched.push_back("cross-stage collective tag " + std::to_string(key.first) + " joined by " +
                        std::to_string(a.parts.size()) + " of " + std::to_string(a.expected) + " stages");
  for (uint32_t j : handle_join_)
    if (j != kNone) unmatched.push_back("a network call was never reported finished");
  check_all_matched(unmatched);
  for (const StageState& st : stages_) {
    check_ran_once(*st.g, st.starts_n, st.finishes_n, st.stage);
    check_causality(*st.g, st.start, st.end, st.stage);
    check_memory_steady(*st.g, st.buf_state, st.live, st.stage);
  }
  net_.check_drained();
  if (pool_ && !pool_->idle()) invariant_violated("cores returned", "a core of a shared node is still held or claimed at the end of the step");
}

EngineOutput Engine::run() {
  check_ = opt_.check_invariants;
  const int64_t p = static_cast<int64_t>(ir_.stages.size());
  capacity_ = ir_.scenario.topology.device.memory_gib * kGiB;
  stages_.resize(static_cast<size_t>(p));
  const Topology& topo = ir_.scenario.topology;
  coll_ = topo.collectives;
  share_.emplace(ir_);
  slow_ = share_->mode() == CoreShare::Mode::sms || share_->mode() == CoreShare::Mode::rank_cores;
  if (share_->mode() == CoreShare::Mode::node_cores) pool_.emplace(share_->nodes(), share_->cores());
  wake_ = coll_.wake_us > 0 && coll_.poll_spin_us > 0;
  dispatch_us_ = topo.device.dispatch_us;
  handoff_us_ = topo.device.stream_handoff_us;
  size_t total_ops = 0;
  for (int64_t s = 0; s < p; ++s) {
    init_stage(stages_[static_cast<size_t>(s)], s);
    total_ops += stages_[static_cast<size_t>(s)].g->ops.size();
  }
  // Pipeline tags: kTagP2PBase + 2 (mb * virtual_stages_total + receiver) + direction.
  const int64_t vs_total = ir_.layout.pp() * std::max<int64_t>(1, ir_.scenario.parallel.virtual_pipeline_stages);
  p2p_dense_.assign(static_cast<size_t>(2 * (ir_.scenario.num_microbatches() + 1) * vs_total + 2), Half{});
  joins_.reserve(total_ops / 4 + 16);
  parts_.reserve(total_ops / 4 + 16);
  req_.members.reserve(16);

  for (uint32_t s = 0; s < stages_.size(); ++s)
    for (OpId id = 0; id < stages_[s].g->ops.size(); ++id)
      if (stages_[s].waiting[id] == 0) make_ready(s, id);

  std::vector<uint64_t> done;
  for (;;) {
    const double t_ev = heap_.empty() ? kInf : heap_.top().t;
    const double t_net = net_.next_completion_us();
    if (t_ev == kInf && t_net == kInf) break;
    if (t_net < t_ev) {
      if (check_) check_clock(now_, t_net, "network");
      done.clear();
      net_.advance(t_net, done);
      now_ = std::max(now_, t_net);
      ++events_;
      for (uint64_t h : done) on_call_done(h);
      continue;
    }
    const Event e = heap_.top();
    heap_.pop();
    if (e.kind == EventKind::finish && slow_ && stale(e)) continue;  // superseded by a rescheduled completion
    if (e.kind == EventKind::spin_end && stages_[e.stage].core[e.op] != StageState::Core::held) continue;  // its call ended first
    if (check_) check_clock(now_, e.t, e.kind == EventKind::start ? "dispatch" : e.kind == EventKind::spin_end ? "spin" : "compute");
    now_ = e.t;
    ++events_;
    if (e.kind == EventKind::start) make_ready(e.stage, e.op);
    else if (e.kind == EventKind::spin_end) release_core(e.stage, e.op);
    else finish(e.stage, e.op);
  }
  for (const StageState& st : stages_)
    if (st.finished != st.g->ops.size()) report_deadlock();
  if (check_) check_end_of_step();

  EngineOutput out;
  out.events = events_;
  out.ops_run = static_cast<int64_t>(total_ops);
  if (opt_.record_ops) out.ops.reserve(total_ops);
  // Ranks ascend with stages (the pipeline coordinate is the slowest), so (rank, op) order.
  for (const StageState& st : stages_) {
    for (OpId id = 0; id < st.g->ops.size(); ++id) {
      out.end_us = std::max(out.end_us, st.end[id]);
      if (opt_.record_ops) out.ops.push_back(OpTiming{st.rank, id, st.start[id], st.end[id]});
    }
    out.ranks.push_back(RankStats{st.rank, st.stage, st.mem.peak_total(), st.mem.peak_time_us, st.mem.peak_op, Breakdown{}});
    out.memory.push_back(st.mem);
  }
  return out;
}

}  // namespace

EngineOutput run_engine(const StepIR& ir, const ComputeModel& compute, NetworkModel& net, const EngineOptions& options) {
  Engine e(ir, compute, net, options);
  return e.run();
}

}  // namespace paralab::sim
