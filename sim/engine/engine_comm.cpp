// paralab — the engine's communication (semantics in engine.hpp, docs/simulator.md "Engine"):
// a communication op becomes network calls (a collective within its stage, one joining stages,
// a transfer matched by tag, a ring shift), joined back when the NetworkModel reports them
// done, and a call's measured correction (overhead.hpp) applied when the network reports its end.
#include <algorithm>
#include <cmath>
#include <string>

#include "ir/error.hpp"
#include "sim/engine/engine_state.hpp"

namespace paralab::sim::detail {

namespace {

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

// The network call of collective op `op` over `m` (the engine's one reusable request).
void Engine::collective_request(const Op& op, const std::vector<int64_t>& m) {
  const CollectiveAttrs& c = *op.collective();
  req_.kind = to_net(c.kind);
  req_.algo = CollectiveAlgo::automatic;
  req_.group = c.group;
  req_.members.assign(m.begin(), m.end());
  req_.bytes = c.bytes;
  req_.symmetric_copies = true;
}

uint32_t Engine::arrivals_needed(StageState& st, GroupKind g) {
  if (st.cls) return g == GroupKind::world ? static_cast<uint32_t>(stages_.size())
                                           : static_cast<uint32_t>(st.cls->peers[static_cast<size_t>(g)].size());
  if (!joins_stages(g)) return 1;
  // The stages whose representatives are in this group: each must reach the collective (once
  // per unit and group kind).
  uint32_t& n = st.stages_in_group[static_cast<size_t>(g)];
  if (n == 0) {
    std::vector<int64_t> stages;
    for (int64_t r : members(st, g)) stages.push_back(ir_.layout.stage_of(r));
    std::sort(stages.begin(), stages.end());
    n = static_cast<uint32_t>(std::unique(stages.begin(), stages.end()) - stages.begin());
  }
  return n;
}

bool Engine::arrive(const ArrivalKey& key, uint32_t needed, uint32_t s, OpId id,
                    std::vector<std::pair<uint32_t, OpId>>& parts) {
  auto it = cross_.find(key);
  if (it == cross_.end()) it = cross_.emplace(key, Arrivals{needed, {}}).first;
  Arrivals& a = it->second;
  a.parts.emplace_back(s, id);
  if (a.parts.size() < a.expected) return false;
  parts = std::move(a.parts);
  cross_.erase(it);
  for (const auto& [ps, pop] : parts)  // the call waited for this, the last arrival
    if (ps != s || pop != id) {
      stages_[ps].op[pop].pred_unit = s;
      stages_[ps].op[pop].pred_op = id;
    }
  return true;
}

void Engine::start_collective(uint32_t s, OpId id, const CollectiveAttrs& c) {
  StageState& st = stages_[s];
  const uint32_t needed = arrivals_needed(st, c.group);
  if (needed <= 1) {
    launch_collective(s, id, c, {{s, id}});
    return;
  }
  // Per-rank mode: every unit of the group runs this stage's graph, so the op id names the call.
  std::vector<std::pair<uint32_t, OpId>> parts;
  if (arrive(ArrivalKey{static_cast<uint8_t>(c.group), group_type(st, c.group), id, 0}, needed, s, id, parts))
    launch_collective(s, id, c, parts);
}

void Engine::start_cross_stage(uint32_t s, OpId id, const CollectiveAttrs& c) {
  StageState& st = stages_[s];
  const uint32_t occurrence = st.tag_seen[c.tag]++;
  std::vector<std::pair<uint32_t, OpId>> parts;
  const ArrivalKey key{static_cast<uint8_t>(c.group), group_type(st, c.group), c.tag, occurrence};
  if (arrive(key, arrivals_needed(st, c.group), s, id, parts)) launch_collective(s, id, c, parts);
}

// Every unit of the call has arrived (`parts`, the first arrival first): it starts now on the
// group of the first arrival's rank.
void Engine::launch_collective(uint32_t s, OpId id, const CollectiveAttrs& c,
                               const std::vector<std::pair<uint32_t, OpId>>& parts) {
  const uint32_t j = new_join(1);
  for (const auto& [ps, pop] : parts) {
    add_part(j, ps, pop);
    stages_[ps].op[pop].start = now_;
  }
  const uint32_t first = parts.front().first;
  const std::vector<int64_t>& m = members(stages_[first], c.group);
  if (m.size() < 2 || c.bytes <= 0) {  // nothing to exchange: every participant done at once
    const Join& jn = joins_[j];
    for (uint32_t i = 0; i < jn.count; ++i) schedule(parts_[jn.first + i].first, parts_[jn.first + i].second, now_);
    return;
  }
  collective_request(stages_[s].g->ops[id], m);
  req_.symmetric_copies = symmetric(stages_[first], c.group);
  bind(net_.start(req_, now_), j);
  if (slow_) {
    const int64_t sms = collective_sms(first, c.group, m);
    const Join& jn = joins_[j];
    for (uint32_t i = 0; i < jn.count; ++i) hold_sms(parts_[jn.first + i].first, parts_[jn.first + i].second, sms);
  }
}

void Engine::start_p2p(uint32_t s, OpId id, const P2PAttrs& p, bool is_send) {
  Half* slot = nullptr;
  if (p.tag >= kTagP2PBase && p.tag - kTagP2PBase < p2p_dense_.size()) {
    slot = &p2p_dense_[p.tag - kTagP2PBase];
  } else {
    // Per-rank mode: several units of a stage use one tag; the receiving unit tells them apart.
    uint64_t unit = 0;
    if (stages_[s].cls)
      unit = is_send ? opt_.classes->class_of[static_cast<size_t>(ir_.peer_of(stages_[s].rank, stages_[s].g->ops[id], true))] : s;
    slot = &p2p_sparse_[(uint64_t{p.tag} << 32) | unit];
  }
  if (slot->stage == kNone) {
    *slot = Half{s, id, is_send};
    return;
  }
  const Half other = *slot;
  *slot = Half{};
  stages_[other.stage].op[other.op].pred_unit = s;  // the first half waited for this one
  stages_[other.stage].op[other.op].pred_op = id;
  if (other.is_send == is_send)
    throw InternalError("engine: two " + std::string(is_send ? "sends" : "receives") + " share pipeline tag " +
                        std::to_string(p.tag));
  const uint32_t ss = is_send ? s : other.stage, rs = is_send ? other.stage : s;
  const OpId sop = is_send ? id : other.op, rop = is_send ? other.op : id;
  const Op& send_op = stages_[ss].g->ops[sop];
  const int64_t src = stages_[ss].rank;
  const int64_t dst = ir_.peer_of(src, send_op, true);
  const bool per_rank = stages_[rs].cls != nullptr;
  if (per_rank ? opt_.classes->class_of[static_cast<size_t>(dst)] != rs : dst != stages_[rs].rank)
    throw InternalError("engine: " + send_op.full_name() + " (stage " + std::to_string(ss) + ") goes to rank " +
                        std::to_string(dst) + " but its tag matches a receive on stage " + std::to_string(rs));
  if (check_) {
    const Op& recv_op = stages_[rs].g->ops[rop];
    check_transfer_sizes(send_op, send_op.p2p()->bytes, recv_op, recv_op.p2p()->bytes);
    const int64_t from = ir_.peer_of(stages_[rs].rank, recv_op, false);
    if (per_rank ? opt_.classes->class_of[static_cast<size_t>(from)] != ss : from != src)
      invariant_violated("bytes delivered", recv_op.full_name() + " (stage " + std::to_string(rs) +
                                                ") receives from another rank than " + send_op.full_name() + " sends from");
  }
  stages_[ss].op[sop].start = now_;
  stages_[rs].op[rop].start = now_;
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
  req_.symmetric_copies = symmetric(stages_[ss], GroupKind::pp);
  bind(net_.start(req_, now_), j);
  if (slow_) {
    hold_sms(ss, sop, coll_.p2p_sms);
    hold_sms(rs, rop, coll_.p2p_sms);
  }
}

void Engine::start_ring(uint32_t s, OpId id, const P2PAttrs& p) {
  StageState& st = stages_[s];
  const uint32_t needed = arrivals_needed(st, p.group);
  if (needed <= 1) {
    launch_ring(p, {{s, id}});
    return;
  }
  // Per-rank mode: the ring shift starts when every unit of the ring has reached it.
  std::vector<std::pair<uint32_t, OpId>> parts;
  if (arrive(ArrivalKey{static_cast<uint8_t>(p.group), group_type(st, p.group), id, 1}, needed, s, id, parts))
    launch_ring(p, parts);
}

// Every member sends to the one `off` ahead: one transfer per ring edge, each standing for its
// copies in the other groups of the stage (of the same type, in per-rank mode).
void Engine::launch_ring(const P2PAttrs& p, const std::vector<std::pair<uint32_t, OpId>>& parts) {
  const uint32_t first = parts.front().first;
  const std::vector<int64_t>& m = members(stages_[first], p.group);
  const auto n = static_cast<int64_t>(m.size());
  const int64_t off = p.send_offset != 0 ? p.send_offset : -p.recv_offset;
  if (n < 2 || off % n == 0 || p.bytes <= 0) {
    for (const auto& [ps, pop] : parts) schedule(ps, pop, now_);
    return;
  }
  const uint32_t j = new_join(static_cast<uint32_t>(n));
  for (const auto& [ps, pop] : parts) {
    add_part(j, ps, pop);
    stages_[ps].op[pop].start = now_;
  }
  for (int64_t i = 0; i < n; ++i) {
    req_.kind = sim::CollKind::p2p;
    req_.algo = CollectiveAlgo::automatic;
    req_.group = p.group;
    req_.members.assign({m[static_cast<size_t>(i)], m[static_cast<size_t>(((i + off) % n + n) % n)]});
    req_.bytes = p.bytes;
    req_.symmetric_copies = symmetric(stages_[first], p.group);
    bind(net_.start(req_, now_), j);
  }
  if (slow_)
    for (const auto& [ps, pop] : parts) hold_sms(ps, pop, coll_.p2p_sms);
}

void Engine::on_call_done(uint64_t handle) {
  if (handle >= handle_join_.size() || handle_join_[handle] == kNone)
    throw InternalError("engine: the network reported an unknown call " + std::to_string(handle));
  const uint32_t j = handle_join_[handle];
  handle_join_[handle] = kNone;
  if (--joins_[j].remaining > 0) return;
  const Join jn = joins_[j];
  // A call's measured correction: it ends at start + fixed_us + factor x its modeled time (the
  // network's), never before the network has moved its bytes.
  for (uint32_t i = 0; i < jn.count; ++i) {
    const auto [ps, pop] = parts_[jn.first + i];
    const StageState& st = stages_[ps];
    const double end = st.over.empty() ? now_ : st.op[pop].start + st.over[pop].time.apply(now_ - st.op[pop].start);
    if (end > now_) schedule(ps, pop, end);
    else finish(ps, pop);
  }
}

}  // namespace paralab::sim::detail
