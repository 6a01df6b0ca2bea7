// paralab — the engine's communication (semantics in engine.hpp, docs/simulator.md "Engine"):
// a communication op becomes network calls (a collective within its stage, one joining stages,
// a transfer matched by tag, a ring shift), joined back when the NetworkModel reports them
// done; on a CPU host the wait for a call's last member (the arrival skew) and a sleeping
// poller's wake-up (wake_us) are added here.
#include <algorithm>
#include <cmath>
#include <string>

#include "ir/error.hpp"
#include "sim/engine/engine_state.hpp"

namespace paralab::sim::detail {

namespace {

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

}  // namespace

void Engine::start_comm(uint32_t s, OpId id) {
  const Op& op = stages_[s].g->ops[id];
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
    default: throw InternalError("engine: op " + op.full_name() + " is not communication");
  }
}

// The network call of collective op `op` over `m` (the engine's one reusable request), with
// its class's calibrated fixed cost where the topology has one.
void Engine::collective_request(const Op& op, const std::vector<int64_t>& m) {
  const CollectiveAttrs& c = *op.collective();
  req_.kind = to_sim(c.kind);
  req_.algo = CollectiveAlgo::automatic;
  req_.group = c.group;
  req_.members.assign(m.begin(), m.end());
  req_.bytes = c.bytes;
  req_.symmetric_copies = true;
  req_.launch_lat_us = call_launch_us(op);
}

std::optional<double> Engine::call_launch_us(const Op& op) const {
  if (call_lat_us_.empty() || !op.collective()) return std::nullopt;
  const double us = call_lat_us_[call_index(op.collective()->kind, op.collective()->group, op.phase)];
  if (std::isnan(us)) return std::nullopt;
  return us;
}

void Engine::start_collective(uint32_t s, OpId id, const CollectiveAttrs& c) {
  StageState& st = stages_[s];
  const std::vector<int64_t>& m = members(st, c.group);
  if (m.size() < 2 || c.bytes <= 0) {  // nothing to exchange: done at once
    schedule(s, id, now_);
    return;
  }
  collective_request(stages_[s].g->ops[id], m);
  const uint32_t j = new_join(1);
  add_part(j, s, id);
  bind(net_.start(req_, now_), j);
  if (slow_) hold_sms(s, id, collective_sms(s, c.group, m));
  if (contend_) st.contended[id] = contended_now(s, c.group);
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
  collective_request(stages_[s].g->ops[id], m);
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

// The wait for a collective's or ring shift's last member within the stage, over more than one
// rank (0 for other ops): CollectiveSpec::sync_skew_us plus sync_drift x the time since the
// stage's compute stream last waited for a call (the ranks' compute drifts apart from there;
// bench/results/validate_cpu.md, "eighth session"). The members' arrivals spread over
// spread_drift x that time (default twice the mean wait: two members, the first waits the whole
// spread); a spread beyond poll_spin_us puts the earliest member's poller to sleep, and the
// call ends wake_us later (wake_delay_us). Only the time since decides that: the constant part
// is a heavy-tailed mean (quickstart: mean 1,551 us, median 0.05 us) that put every call to
// sleep (seventh session).
double Engine::arrival_skew_us(uint32_t s, OpId id) {
  StageState& st = stages_[s];
  const Op& op = st.g->ops[id];
  if (op.kind != OpKind::collective && op.kind != OpKind::sendrecv) return 0.0;
  if (coll_.sync_skew_us <= 0 && coll_.sync_drift <= 0 && coll_.spread_drift <= 0) return 0.0;
  const GroupKind gk = op.kind == OpKind::collective ? op.collective()->group : op.p2p()->group;
  if (!within_stage(gk) || members(st, gk).size() < 2) return 0.0;
  const double since_us = now_ - st.synced_at;
  const double spread_per_us = coll_.spread_drift > 0 ? coll_.spread_drift : 2.0 * coll_.sync_drift;
  if (wake_) st.early_asleep[id] = spread_per_us * since_us > coll_.poll_spin_us;
  return coll_.sync_skew_us + coll_.sync_drift * since_us;
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
  for (uint32_t i = 0; wake_ && i < jn.count; ++i) {
    const auto [ps, pop] = parts_[jn.first + i];
    if (stages_[ps].g->ops[pop].kind == OpKind::recv) recv_wake_us = wake_delay_us(ps, pop);
  }
  for (uint32_t i = 0; i < jn.count; ++i) {
    const auto [ps, pop] = parts_[jn.first + i];
    // A send ends when its sender sees the receiver's acknowledgement (CollectiveSpec::
    // p2p_ack_us), after the receiver saw the data, and a sleeping sender's poller later still
    // (wake_us); other ops when their own thread sees the call complete (CollectiveSpec::
    // wake_us). On cpu-pp4 (H2, 1,680 transfers) sends whose own rank had waited over 0.5 ms
    // ended a median 114 us after their receive, the others 19 us (both awake) and -10 us
    // (receiver asleep): the sender's sleep moves its end, the receiver's only through the
    // receive (bench/results/validate_cpu.md, "thirty-first session"). The thread is idle
    // meanwhile, so it stops sharing the rank's cores now.
    const bool acked = coll_.p2p_ack_us > 0 && stages_[ps].g->ops[pop].kind == OpKind::send;
    const double later_us = (acked ? recv_wake_us + coll_.p2p_ack_us : 0.0) + wake_delay_us(ps, pop) + call_end_extra_us(ps, pop);
    if (later_us > 0) {
      if (slow_ && stages_[ps].holds[pop]) end_hold(ps, pop);
      if (pool_) leave_core(ps, pop);
      schedule(ps, pop, now_ + later_us);
    } else {
      finish(ps, pop);
    }
  }
}

// A call that ends more than poll_spin_us after its rank posted it, or whose earliest member
// slept before the last arrived (arrival_skew_us), is seen when a sleeping poller next tests
// (and, on shared cores, runs): wake_us later (CollectiveSpec::wake_us).
double Engine::wake_delay_us(uint32_t s, OpId id) const {
  const StageState& st = stages_[s];
  return wake_ && (now_ - st.posted[id] > coll_.poll_spin_us || st.early_asleep[id]) ? coll_.wake_us : 0.0;
}

// Contention among a node's pollers (CollectiveSpec::contended_lat_us): a collective within
// its stage that starts while a call of another group kind, or of another stage, on its node
// was posted less than poll_spin_us ago and has not ended pays contended_lat_us more; that
// call's thread still spins on the cores this call's members need. The in-situ calibration
// classifies the executed calls the same way at their last member's arrival (analysis/
// in_situ.cpp, CommSample::contended_since_us). A call posted at the same instant counts, on
// both sides: in the simulated step a layer's DP prefetch and its TP call are often released
// by the same event, and its executed twin posts the DP call first and the TP call's members
// arrive after. Which of the two the engine takes first must not decide, so a post also marks
// the collectives that started at this instant before it. The lists hold the few calls in
// flight.
void Engine::post_on_node(uint32_t s, OpId id) {
  const Op& op = stages_[s].g->ops[id];
  const GroupKind g = op.kind == OpKind::collective ? op.collective()->group : op.p2p()->group;
  auto& v = posted_on_node_[static_cast<size_t>(stage_node_[s])];
  for (const Posted& p : v) {
    if (p.at_us != now_ || (p.stage == s && p.group == g)) continue;
    const Op& other = stages_[p.stage].g->ops[p.op];
    if (other.kind == OpKind::collective && within_stage(p.group)) stages_[p.stage].contended[p.op] = 1;
  }
  v.push_back(Posted{s, id, g, now_});
}

void Engine::end_on_node(uint32_t s, OpId id) {
  auto& v = posted_on_node_[static_cast<size_t>(stage_node_[s])];
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i].stage == s && v[i].op == id) {
      v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
}

// What a collective pays at its end beyond the fixed cost it started with (its class's point,
// else launch_lat_us). Beside compute: where its rank's compute stream ran an op at some time
// during the call (one in flight now, or one that ended after the call started) and its class
// has a cost for that (CallPoint::beside_lat_us), the difference; on shared cores the compute
// thread holds the core the call's thread needs (cpu-tp2-dp2-zero3's backward TP all-gathers:
// 112 against 46 us; bench/results/validate_cpu.md, "fifty-second session"). The in-situ
// calibration asks the same of each executed call, between its last arrival and its end
// (analysis/in_situ.cpp, CommSample::beside_compute). Contended: the class's fixed cost of the
// contended calls (launch_lat_us + contended_lat_us, as the calibration fitted it over them
// all, whatever their kind and phase) where that is more than what it pays so far.
double Engine::call_end_extra_us(uint32_t s, OpId id) const {
  const StageState& st = stages_[s];
  const Op& op = st.g->ops[id];
  if (op.kind != OpKind::collective) return 0.0;
  const std::optional<double> own = call_launch_us(op);
  double extra = 0.0;
  if (own && within_stage(op.collective()->group)) {
    const double beside_us = call_beside_us_[call_index(op.collective()->kind, op.collective()->group, op.phase)];
    if (!std::isnan(beside_us) && (st.computing_ops > 0 || st.computed_until > st.start[id]))
      extra = std::max(0.0, beside_us - *own);
  }
  if (contend_ && st.contended[id]) {
    if (!own) return coll_.contended_lat_us;
    extra += std::max(0.0, coll_.launch_lat_us + coll_.contended_lat_us - (*own + extra));
  }
  return extra;
}

bool Engine::contended_now(uint32_t s, GroupKind g) const {
  for (const Posted& p : posted_on_node_[static_cast<size_t>(stage_node_[s])])
    if ((p.stage != s || p.group != g) && now_ - p.at_us < coll_.poll_spin_us) return true;
  return false;
}

}  // namespace paralab::sim::detail
