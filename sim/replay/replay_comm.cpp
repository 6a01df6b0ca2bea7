// paralab — trace replay's communication (replay.hpp): collectives matched by (group,
// occurrence), transfers by (source, destination, tag, occurrence), both as NetworkModel calls
// over the members' real ranks (no symmetric copies: every rank is simulated), and the report
// of traces that cannot complete.
#include <algorithm>

#include "sim/replay/replay_state.hpp"

namespace paralab::sim::replay::detail {

namespace {

std::string describe(const TraceNode& n) {
  std::string s = std::string(to_string(n.kind)) + " '" + n.name + "'";
  if (n.kind == NodeKind::collective)
    s += " (" + std::string(to_string(n.coll)) + " of " + std::to_string(n.comm_bytes) + " bytes on group '" +
         (n.group.empty() ? std::string("all ranks") : n.group) + "')";
  if (n.kind == NodeKind::send) s += " (to rank " + std::to_string(n.peer) + ", tag " + std::to_string(n.tag) + ")";
  if (n.kind == NodeKind::recv) s += " (from rank " + std::to_string(n.peer) + ", tag " + std::to_string(n.tag) + ")";
  return s;
}

}  // namespace

void Replayer::arrive_collective(Ref x) {
  const TraceNode& n = node(x);
  const std::vector<int64_t>& members = n.group.empty() ? world_ : set_.groups.at(n.group);
  Pending& p = colls_[{n.group, state(x).occurrence}];
  if (!p.parts.empty()) {
    const TraceNode& first = node(p.parts.front());
    if (first.coll != n.coll || first.comm_bytes != n.comm_bytes)
      throw TraceError(ranks_[x.rank].trace->file, n.id,
                       describe(n) + " is matched (occurrence " + std::to_string(state(x).occurrence + 1) +
                           " of its group) with rank " + std::to_string(p.parts.front().rank) + "'s " + describe(first) +
                           ": the members disagree");
  }
  p.parts.push_back(x);
  p.last = x;
  if (p.parts.size() < members.size()) return;
  const Pending done = std::move(p);
  colls_.erase({n.group, state(x).occurrence});
  launch(done.parts, done.last, false);
}

void Replayer::arrive_p2p(Ref x) {
  const TraceNode& n = node(x);
  const bool send = n.kind == NodeKind::send;
  const int64_t me = x.rank;
  const auto key = std::make_tuple(send ? me : n.peer, send ? n.peer : me, n.tag, state(x).occurrence);
  Pending& p = p2p_[key];
  p.parts.push_back(x);
  p.last = x;
  if (p.parts.size() < 2) return;
  const Pending done = std::move(p);
  p2p_.erase(key);
  launch(done.parts, done.last, true);
}

// Starts the call of `parts` (every member ready now); `last` arrived last and what released it
// released them all (the critical path).
void Replayer::launch(const std::vector<Ref>& parts, Ref last, bool p2p) {
  const Ref by = state(last).released_by;
  for (Ref x : parts) {
    NodeState& s = state(x);
    s.start = now_;
    s.started = true;
    s.released_by = by;
  }
  const TraceNode* lead = &node(parts.front());
  if (p2p && lead->kind != NodeKind::send) lead = &node(parts.back());
  req_.algo = opt_.algo;
  req_.symmetric_copies = false;
  req_.bytes = lead->comm_bytes;
  if (p2p) {
    const Ref src = lead == &node(parts.front()) ? parts.front() : parts.back();
    req_.kind = CollKind::p2p;
    req_.group = GroupKind::pp;
    req_.members.assign({static_cast<int64_t>(src.rank), lead->peer});
  } else {
    req_.kind = lead->coll;
    req_.group = GroupKind::world;
    const std::vector<int64_t>& m = lead->group.empty() ? world_ : set_.groups.at(lead->group);
    req_.members.assign(m.begin(), m.end());
  }
  if (req_.members.size() < 2 || req_.bytes <= 0) {
    for (Ref x : parts) schedule(x, now_);
    return;
  }
  const uint64_t h = net_->start(req_, now_);
  if (joins_.size() <= h) joins_.resize(h + 1);
  joins_[h] = parts;
}

void Replayer::on_call_done(uint64_t handle) {
  if (handle >= joins_.size() || joins_[handle].empty())
    throw InternalError("trace replay: the network reported an unknown call " + std::to_string(handle));
  const std::vector<Ref> parts = std::move(joins_[handle]);
  joins_[handle].clear();
  for (Ref x : parts) finish(x);
}

// Names, for every rank that did not finish (the first 8), its first node that never ran and
// why: a call still waiting for its peers, or a node still waiting for dependencies.
void Replayer::stuck() const {
  std::string msg = "the traces cannot complete:";
  const RankTrace* first = nullptr;
  uint64_t first_id = 0;
  int listed = 0;
  for (const RankState& r : ranks_) {
    if (r.finished == r.st.size()) continue;
    uint32_t i = 0;
    while (r.st[i].done) ++i;
    for (uint32_t j = 0; j < r.st.size(); ++j)  // prefer a node that was ready (the blocked call)
      if (!r.st[j].done && r.st[j].waits == 0) {
        i = j;
        break;
      }
    const TraceNode& n = r.trace->nodes[i];
    if (!first) first = r.trace, first_id = n.id;
    if (++listed > 8) continue;
    msg += " rank " + std::to_string(r.trace->rank) + " node " + std::to_string(n.id) + " " + describe(n);
    msg += r.st[i].waits > 0 ? " waits for " + std::to_string(r.st[i].waits) + " dependencies;"
                             : " is ready but its peers never reached the matching call;";
  }
  if (listed > 8) msg += " and " + std::to_string(listed - 8) + " more ranks";
  throw TraceError(first ? first->file : set_.source, first ? std::optional<uint64_t>(first_id) : std::nullopt, msg);
}

}  // namespace paralab::sim::replay::detail
