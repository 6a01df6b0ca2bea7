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
    const double end = st.over.empty() ? now_ : st.start[pop] + st.over[pop].time.apply(now_ - st.start[pop]);
    if (end > now_) schedule(ps, pop, end);
    else finish(ps, pop);
  }
}

}  // namespace paralab::sim::detail
