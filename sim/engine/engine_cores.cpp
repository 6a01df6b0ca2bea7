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
  if (off_device(st.g->ops[id].stream)) {  // a copy engine or the host's cores: no SM, no core pool
    st.op[id].ev_seq = seq_;  // never rescheduled: its one completion event is current
    schedule(s, id, now_ + st.op[id].dur);
    return;
  }
  if (pool_) {
    claim_core(s, id);
    return;
  }
  if (!slow_) {
    schedule(s, id, now_ + st.op[id].dur);
    return;
  }
  st.op[id].ev_seq = seq_;
  st.running.push_back(StageState::Running{id, st.op[id].dur, now_});
  schedule(s, id, st.rate == 1.0 ? now_ + st.op[id].dur : now_ + st.op[id].dur / st.rate);
}

// A compute op's completion event is stale when the op was rescheduled after it was pushed.
bool Engine::stale(const Event& e) const {
  const StageState& st = stages_[e.stage];
  const StageState::OpState& o = st.op[e.op];
  return !o.comm && o.ev_seq != e.seq;
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
  if (sms <= 0 || st.op[id].holds) return;
  st.op[id].holds = static_cast<uint16_t>(std::min<int64_t>(sms, UINT16_MAX));
  st.held_sms += st.op[id].holds;
  set_rate(s);
}

void Engine::release_sms(uint32_t s, OpId id) {
  StageState& st = stages_[s];
  st.held_sms -= st.op[id].holds;
  st.op[id].holds = 0;
  set_rate(s);
}

// Compute progresses at the rate core_share.hpp gives for what communication holds (the SMs
// left free, or the rank's fair share of its cores): every compute op in flight on the stage is
// rescheduled when it changes.
void Engine::set_rate(uint32_t s) {
  StageState& st = stages_[s];
  const double rate = share_->rate(st.held_sms);
  if (rate == st.rate) return;
  for (StageState::Running& r : st.running) {
    r.left_us = std::max(0.0, r.left_us - (now_ - r.since_us) * st.rate);
    r.since_us = now_;
    st.op[r.op].ev_seq = seq_;
    schedule(s, r.op, now_ + r.left_us / rate);
  }
  st.rate = rate;
}

// --- Shared cores (core_pool.hpp) ----------------------------------------------------------

// A compute op asks its node for cores: as many as the stage has ranks there (they run it
// together), at most the node's.
void Engine::claim_core(uint32_t s, OpId id) {
  StageState& st = stages_[s];
  const auto stage = static_cast<uint32_t>(st.stage);  // a unit's node and ranks are its stage's
  if (pool_->acquire(share_->node_of_stage(stage), CorePool::Claim{s, id, share_->claim_cores(stage)})) {
    run_on_core(s, id);
    return;
  }
  st.op[id].core = StageState::Core::queued;
}

// A claim was granted now. When the stage's ranks on the node outnumber its cores they take
// turns, each at full speed, so the op holds the cores for ranks / cores times its duration and
// the representative's own turn is the last (its op starts that much later: what each rank
// measures is the op's duration, the turns before it are waiting).
void Engine::run_on_core(uint32_t s, OpId id) {
  StageState& st = stages_[s];
  st.op[id].core = StageState::Core::held;
  const double end = now_ + st.op[id].dur * share_->turns(static_cast<uint32_t>(stages_[s].stage));
  st.op[id].start = end - st.op[id].dur;
  schedule(s, id, end);
}

// The op is done: it gives its cores back, and the claims queued behind it run in order.
void Engine::release_core(uint32_t s, OpId id) {
  StageState& st = stages_[s];
  if (st.op[id].core != StageState::Core::held) return;
  st.op[id].core = StageState::Core::none;
  std::vector<CorePool::Claim> granted;
  const auto stage = static_cast<uint32_t>(stages_[s].stage);
  pool_->release(share_->node_of_stage(stage), share_->claim_cores(stage), granted);
  for (const CorePool::Claim& c : granted) run_on_core(c.stage, c.op);
}

}  // namespace paralab::sim::detail
