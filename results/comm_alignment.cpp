// paralab — communication timed from its last member's arrival (comm_alignment.hpp).
#include "results/comm_alignment.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace paralab {

std::vector<size_t> transfer_partners(const StepResult& M, const StepIR& ir) {
  std::map<std::tuple<int64_t, uint32_t, bool>, size_t> end;  // (rank, tag, is_send) -> op index
  for (size_t i = 0; i < M.ops.size(); ++i) {
    const Op& op = ir.graph_for(M.ops[i].rank).op(M.ops[i].op);
    if (op.kind == OpKind::send || op.kind == OpKind::recv) end[{M.ops[i].rank, op.p2p()->tag, op.kind == OpKind::send}] = i;
  }
  std::vector<size_t> partner(M.ops.size(), SIZE_MAX);
  for (const auto& [key, i] : end) {
    const auto& [rank, tag, send] = key;
    const int64_t peer = ir.peer_of(rank, ir.graph_for(rank).op(M.ops[i].op), send);
    auto it = end.find({peer, tag, !send});
    if (peer >= 0 && it != end.end()) partner[i] = it->second;
  }
  return partner;
}

int64_t align_comm_starts(StepResult& M, const StepIR& ir) { return align_comm_starts(M, ir, transfer_partners(M, ir)); }

int64_t align_comm_starts(StepResult& M, const StepIR& ir, const std::vector<size_t>& partner) {
  std::map<std::pair<int64_t, OpId>, size_t> at;
  for (size_t i = 0; i < M.ops.size(); ++i) at[{M.ops[i].rank, M.ops[i].op}] = i;
  std::set<int64_t> ranks;
  for (const OpTiming& t : M.ops) ranks.insert(t.rank);
  // Per rank: cross-stage collectives by (tag, occurrence).
  std::map<int64_t, std::map<std::pair<uint32_t, int>, OpId>> cross;
  std::map<std::pair<int64_t, OpId>, std::pair<uint32_t, int>> cross_key;
  for (const int64_t rank : ranks) {
    const StepGraph& g = ir.graph_for(rank);
    std::map<uint32_t, int> seen;
    for (const Op& op : g.ops) {
      if (const auto* c = op.collective()) {
        if (within_stage(c->group)) continue;
        const std::pair<uint32_t, int> key{c->tag, seen[c->tag]++};
        cross[rank][key] = op.id;
        cross_key[{rank, op.id}] = key;
      }
    }
  }
  auto start_of = [&](int64_t rank, OpId op, double& s) {
    auto it = at.find({rank, op});
    if (it != at.end()) s = std::max(s, M.ops[it->second].start_us);
  };
  std::vector<double> start(M.ops.size());
  int64_t moved = 0;
  for (size_t i = 0; i < M.ops.size(); ++i) {
    const OpTiming& t = M.ops[i];
    const Op& op = ir.graph_for(t.rank).op(t.op);
    double s = t.start_us;
    if (const auto* c = op.collective()) {
      const std::vector<int64_t> members = ir.group_of(t.rank, op);
      if (within_stage(c->group)) {
        for (int64_t m : members) start_of(m, t.op, s);  // same stage: the same op id
      } else {
        const auto key = cross_key.at({t.rank, t.op});
        for (int64_t m : members) {
          auto r = cross.find(m);
          if (r == cross.end()) continue;
          auto o = r->second.find(key);
          if (o != r->second.end()) start_of(m, o->second, s);
        }
      }
    } else if (op.kind == OpKind::sendrecv) {
      for (int64_t m : ir.group_of(t.rank, op)) start_of(m, t.op, s);  // a ring shift: symmetric in the stage
    } else if (partner[i] != SIZE_MAX) {
      s = std::max(s, M.ops[partner[i]].start_us);
    }
    start[i] = std::min(s, t.end_us);
    if (start[i] != t.start_us) ++moved;
  }
  for (size_t i = 0; i < M.ops.size(); ++i) M.ops[i].start_us = start[i];
  return moved;
}

}  // namespace paralab
