// paralab — the engine's processors (semantics in engine.hpp, docs/simulator.md "Compute beside
// communication" and "Shared cores"): compute slowed by communication holding SMs or a rank's
// cores (core_share.hpp), and a node's cores as a first-come-first-served pool (core_pool.hpp).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/engine/engine_state.hpp"

namespace paralab::sim::detail {

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
  st.ev_seq[id] = seq_;
  // Every core of the rank held by communication (rank_cores, rate 0): the compute thread is
  // not running, so the op begins when a core comes back (set_rate), as the executor's op_begin
  // does.
  if (st.rate == 0.0) {
    st.running.push_back(StageState::Running{id, st.dur[id], now_, false});
    return;
  }
  st.running.push_back(StageState::Running{id, st.dur[id], now_, true});
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
  StageState& st = stages_[s];
  if (sms <= 0 || st.holds[id]) return;  // held since its thread woke (rank_cores_)
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
// free, or the rank's cores left to it): every compute op in flight on the stage is
// rescheduled when it changes. At rate 0 an op in flight pauses (its completion events go
// stale and none is pushed) and one dispatched then waits; when the rate comes back the paused
// ops resume and the waiting ones begin now.
void Engine::set_rate(uint32_t s) {
  StageState& st = stages_[s];
  const double rate = share_->rate(st.held_sms);
  if (rate == st.rate) return;
  for (StageState::Running& r : st.running) {
    if (r.begun) r.left_us = std::max(0.0, r.left_us - (now_ - r.since_us) * st.rate);
    r.since_us = now_;
    st.ev_seq[r.op] = seq_;
    if (rate == 0.0) {
      // One released at this same instant as the call that takes the core has not begun: its
      // thread was preempted first (whichever of the two the engine released first).
      if (st.start[r.op] == now_) r.begun = false;
      continue;
    }
    if (!r.begun) {
      r.begun = true;
      st.start[r.op] = now_;
    }
    schedule(s, r.op, now_ + r.left_us / rate);
  }
  st.rate = rate;
}

// --- A CPU rank's own cores (CoreShare::Mode::rank_cores) ------------------------------------

// Threads a communication op keeps busy from its wake-up: a collective's (intra- or
// inter-node) or a ring shift's within the stage. Ops that wait for another stage (a pipeline
// send or receive, a collective joining stages) hold from their transfer's start, as before:
// a poller's hold from its post would wait for a stage whose compute may itself wait for a
// core (a deadlock where no spin window bounds it; docs/simulator.md).
int64_t Engine::comm_sms(uint32_t s, OpId id) {
  StageState& st = stages_[s];
  const Op& op = st.g->ops[id];
  if (op.kind == OpKind::collective) {
    const CollectiveAttrs& c = *op.collective();
    return within_stage(c.group) ? collective_sms(s, c.group, members(st, c.group)) : 0;
  }
  return op.kind == OpKind::sendrecv && within_stage(op.p2p()->group) ? coll_.p2p_sms : 0;
}

// The executor's communication worker, once it runs on a core its rank's compute thread
// runs on, keeps it until its call ends: a call of microseconds ends long before the
// scheduler's slice would give compute a turn (Linux EEVDF, Documentation/scheduler/
// sched-eevdf.rst). Measured on cpu-tp2 (2 ranks on the 2-core build machine, 15 runs x 136
// backward column-parallel linears): the weight-gradient GEMM, free to run beside its
// data-gradient's reduce-scatter, started after that call had ended in 1,962 of 2,040 cases,
// 15.0-17.4 us (median per run) after the data-gradient GEMM: the worker's wake-up and post
// (7.8-8.1 us), the call (4.2-5.8 us) and the switch back (2.7-3.2 us). On quickstart (GEMMs
// of 5-7 ms) the woken worker mostly waited for the core instead: its fc1 reduce-scatter was
// posted 1.9 ms into the weight-gradient GEMM beside it, which then stopped for the call's
// 182 us. So the thread holds its share of the rank's cores from its wake-up (this, called
// when the op is released; true when it holds), through a hand-off of DeviceSpec::
// handoff_on_core_us (the median: the wake-up's own cost), its post and its call, until
// compute_handoff_us after the call ends (end_hold) or its spin window ends (make_ready). The
// hand-off's tail beyond the median is the worker waiting for a core compute keeps: compute
// loses nothing then, so it is not modeled (docs/simulator.md).
bool Engine::hold_from_wake(uint32_t s, OpId id) {
  const int64_t n = comm_sms(s, id);
  if (n <= 0) return false;
  hold_sms(s, id, n);
  return true;
}

void Engine::end_hold(uint32_t s, OpId id) {
  if (!rank_cores_ || compute_handoff_us_ <= 0) {
    release_sms(s, id);
    return;
  }
  heap_.push(Event{now_ + compute_handoff_us_, seq_++, s, id, EventKind::core_back});
}

// --- Shared cores (core_pool.hpp) ----------------------------------------------------------

// A compute op, or a posted communication op's polling thread, asks its node for cores: as
// many as the stage has ranks there (they run it together), at most the node's.
void Engine::claim_core(uint32_t s, OpId id) {
  StageState& st = stages_[s];
  if (is_comm(st.g->ops[id].kind)) st.spin_until[id] = now_ + share_->spin_us();
  const int64_t node = share_->node_of_stage(s);
  if (pool_->acquire(node, CorePool::Claim{s, id, share_->claim_cores(s)})) {
    run_on_core(s, id);
    return;
  }
  st.core[id] = StageState::Core::queued;
  if (yield_) yield_pollers(node, share_->claim_cores(s));
}

// The stage's ranks start or stop computing (StageState::computing): the node's count of
// computing ranks that sets the dispatch gap (pool_dispatch_us) follows.
void Engine::set_computing(uint32_t s, bool on) {
  StageState& st = stages_[s];
  if (node_busy_.empty() || st.computing == on) return;
  st.computing = on;
  node_busy_[static_cast<size_t>(share_->node_of_stage(s))] += on ? share_->ranks_on_node(s) : -share_->ranks_on_node(s);
}

// The executor's gap between two compute ops of a rank, where the node's ranks take turns on
// its cores: the op's end hands the turn to a waiting thread and the rank queues again behind
// the others computing, so the gap grows with them (Calibration::dispatch; docs/simulator.md,
// "Shared cores").
double Engine::pool_dispatch_us(uint32_t s) const {
  const int64_t n = node_busy_[static_cast<size_t>(share_->node_of_stage(s))];
  const auto last = static_cast<int64_t>(busy_dispatch_us_.size());
  return busy_dispatch_us_[static_cast<size_t>(std::clamp<int64_t>(n, 1, last) - 1)];
}

// A claim waits on `node`: polling threads holding cores there give `cores` of them up
// poll_yield_us after they took them (now, if that has passed), the earliest first, as the
// executor's pollers hand their turn over every 32 tests while a thread waits. A poller that
// gave its core up spins on without one until its call ends (it claims none again: the
// simulator's call does not need its thread).
void Engine::yield_pollers(int64_t node, int64_t cores) {
  for (const auto& [ps, pop] : pollers_[static_cast<size_t>(node)]) {
    if (cores <= 0) break;
    StageState& pst = stages_[ps];
    const double at = std::max(now_, pst.held_since[pop] + yield_us_);
    if (at < pst.spin_until[pop]) {
      pst.spin_until[pop] = at;
      heap_.push(Event{at, seq_++, ps, pop, EventKind::spin_end});
    }
    cores -= share_->claim_cores(ps);
  }
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
    if (now_ >= st.spin_until[id]) {
      release_core(s, id);
      return;
    }
    st.held_since[id] = now_;
    const int64_t node = share_->node_of_stage(s);
    if (yield_) {
      pollers_[static_cast<size_t>(node)].emplace_back(s, id);
      // Granted while others still wait (first come, first served): it gives way in turn.
      if (pool_->waiting(node)) st.spin_until[id] = std::min(st.spin_until[id], now_ + yield_us_);
    }
    heap_.push(Event{st.spin_until[id], seq_++, s, id, EventKind::spin_end});
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
  if (yield_ && is_comm(st.g->ops[id].kind)) {
    auto& v = pollers_[static_cast<size_t>(share_->node_of_stage(s))];
    const auto it = std::find(v.begin(), v.end(), std::make_pair(s, id));
    if (it != v.end()) v.erase(it);
  }
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

}  // namespace paralab::sim::detail
