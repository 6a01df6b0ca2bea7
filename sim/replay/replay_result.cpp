// paralab — trace replay's figures (replay.hpp): step time, per-rank busy times and the
// critical path, from the nodes' recorded start and end times.
#include <algorithm>

#include "sim/replay/replay_state.hpp"

namespace paralab::sim::replay::detail {

namespace {

using Spans = std::vector<std::pair<double, double>>;

// Length of the union of [start, end) intervals.
double union_length(Spans s) {
  std::sort(s.begin(), s.end());
  double total = 0, lo = 0, hi = -1;
  for (const auto& [a, b] : s) {
    if (b <= a) continue;
    if (a > hi) {
      if (hi > lo) total += hi - lo;
      lo = a, hi = b;
    } else {
      hi = std::max(hi, b);
    }
  }
  if (hi > lo) total += hi - lo;
  return total;
}

bool is_comm(NodeKind k) { return k == NodeKind::collective || k == NodeKind::send || k == NodeKind::recv; }

RankReplay rank_figures(const RankState& r, double step) {
  RankReplay out;
  out.rank = r.trace->rank;
  out.nodes = static_cast<int64_t>(r.st.size());
  Spans gpu, comm, all;
  for (size_t i = 0; i < r.st.size(); ++i) {
    const TraceNode& n = r.trace->nodes[i];
    const NodeState& s = r.st[i];
    const double d = s.end - s.start;
    out.end_us = std::max(out.end_us, s.end);
    if (n.kind == NodeKind::compute && n.cpu) out.cpu_us += d;
    if (n.kind == NodeKind::compute && !n.cpu) out.compute_us += d, gpu.emplace_back(s.start, s.end);
    if (is_comm(n.kind)) comm.emplace_back(s.start, s.end);
    all.emplace_back(s.start, s.end);
  }
  out.comm_us = union_length(comm);
  Spans gpu_comm = gpu;
  gpu_comm.insert(gpu_comm.end(), comm.begin(), comm.end());
  out.exposed_comm_us = union_length(gpu_comm) - union_length(gpu);
  out.idle_us = std::max(0.0, step - union_length(all));
  return out;
}

}  // namespace

ReplayResult Replayer::collect() const {
  ReplayResult res;
  res.events = events_ + static_cast<int64_t>(net_->stats().settles);
  res.network = net_->stats();
  Ref last;
  double end = -1;
  for (uint32_t r = 0; r < ranks_.size(); ++r)
    for (uint32_t i = 0; i < ranks_[r].st.size(); ++i) {
      const NodeState& s = ranks_[r].st[i];
      ++res.nodes_by_kind[static_cast<size_t>(ranks_[r].trace->nodes[i].kind)];
      if (s.end > end) end = s.end, last = Ref{r, i};
      if (opt_.record_nodes) res.nodes.push_back(NodeTiming{static_cast<int64_t>(r), i, s.ready, s.start, s.end});
    }
  res.step_us = std::max(0.0, end);
  for (const RankState& r : ranks_) res.ranks.push_back(rank_figures(r, res.step_us));
  // The critical path: from the last node back through what released each one.
  for (Ref cur = last; cur.rank != kNone;) {
    const NodeState& s = ranks_[cur.rank].st[cur.node];
    const NodeKind k = ranks_[cur.rank].trace->nodes[cur.node].kind;
    const double d = s.end - s.start;
    if (k == NodeKind::compute) res.critical_compute_us += d;
    else if (is_comm(k)) res.critical_comm_us += d;
    else res.critical_wait_us += d;
    const Ref prev = s.released_by;
    const double before = prev.rank == kNone ? 0.0 : ranks_[prev.rank].st[prev.node].end;
    res.critical_wait_us += std::max(0.0, s.start - before);
    ++res.critical_nodes;
    cur = prev;
  }
  return res;
}

}  // namespace paralab::sim::replay::detail
