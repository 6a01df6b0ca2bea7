// paralab — trace replay (replay.hpp): set-up, the event loop, compute queues and finishing.
// Communication matching and network calls: replay_comm.cpp; figures: replay_result.cpp.
#include <algorithm>
#include <unordered_map>

#include "sim/replay/replay_state.hpp"

namespace paralab::sim::replay {

double priced_compute_us(const TraceNode& n, const DeviceSpec& d) {
  if (n.flops <= 0 && n.bytes <= 0) return 0;
  double peak = d.peak(MathMode::bf16);
  if (peak <= 0) peak = d.peak(MathMode::f32);
  const double flop_s = peak > 0 ? n.flops / (peak * 1e12 * d.gemm_max_efficiency) : 0;
  const double byte_s = d.mem_bw_gbps > 0 ? n.bytes / (d.mem_bw_gbps * 1e9 * d.mem_efficiency) : 0;
  return std::max(flop_s, byte_s) * 1e6 + d.launch_overhead_us;
}

namespace detail {

namespace {

int64_t node_devices(const TraceSet& set, const Topology& topo) {
  const auto world = static_cast<int64_t>(set.ranks.size());
  const int64_t per = set.devices_per_node > 0 ? set.devices_per_node : topo.node.nvlink_domain();
  return std::max<int64_t>(1, std::min(per, world));
}

}  // namespace

Replayer::Replayer(const TraceSet& set, const Topology& topo, const ReplayOptions& opt)
    : set_(set), topo_(topo), opt_(opt) {
  check_trace_set(set);
  const auto world = static_cast<int64_t>(set.ranks.size());
  const Layout layout(1, 1, world, 1, node_devices(set, topo));
  net_ = std::make_unique<NetworkModel>(network_view(topo, layout), layout, opt.algo);
  for (int64_t r = 0; r < world; ++r) world_.push_back(r);
  ranks_.resize(set.ranks.size());
  for (size_t r = 0; r < ranks_.size(); ++r) {
    ranks_[r].trace = &set.ranks[r];
    build(ranks_[r]);
  }
}

// Reverse dependencies (CSR), what each node waits for, and each call's occurrence: the k-th
// collective of its group, the k-th send (receive) to (from) its peer with its tag.
void Replayer::build(RankState& r) {
  const auto& nodes = r.trace->nodes;
  const size_t n = nodes.size();
  r.st.assign(n, NodeState{});
  std::unordered_map<uint64_t, uint32_t> at;
  at.reserve(n);
  for (uint32_t i = 0; i < n; ++i) at.emplace(nodes[i].id, i);
  std::vector<uint32_t> count(n + 1, 0);
  for (const TraceNode& x : nodes)
    for (uint64_t d : x.deps) ++count[at.at(d) + 1];
  for (size_t i = 0; i < n; ++i) count[i + 1] += count[i];
  r.child_begin = count;
  r.children.assign(count[n], 0);
  std::map<std::string, uint32_t> per_group;
  std::map<std::tuple<int, int64_t, uint32_t>, uint32_t> per_peer;
  for (uint32_t i = 0; i < n; ++i) {
    const TraceNode& x = nodes[i];
    for (uint64_t d : x.deps) r.children[count[at.at(d)]++] = i;
    r.st[i].waits = static_cast<uint32_t>(x.deps.size());
    if (x.kind == NodeKind::collective) r.st[i].occurrence = per_group[x.group]++;
    if (x.kind == NodeKind::send || x.kind == NodeKind::recv)
      r.st[i].occurrence = per_peer[{static_cast<int>(x.kind), x.peer, x.tag}]++;
  }
}

void Replayer::schedule(Ref x, double t) { heap_.push(Event{t, seq_++, x.rank, x.node}); }

void Replayer::ready(Ref x, Ref by) {
  NodeState& s = state(x);
  s.ready = now_;
  s.released_by = by;
  const TraceNode& n = node(x);
  switch (n.kind) {
    case NodeKind::compute: {
      RankState& r = ranks_[x.rank];
      const int q = n.cpu ? 1 : 0;
      if (r.running[static_cast<size_t>(q)] == kNone) start_compute(x, by);
      else r.queue[static_cast<size_t>(q)].push_back(x.node);
      return;
    }
    case NodeKind::collective: arrive_collective(x); return;
    case NodeKind::send:
    case NodeKind::recv: arrive_p2p(x); return;
    case NodeKind::none:
      s.start = now_;
      s.started = true;
      schedule(x, now_ + std::max(0.0, n.duration_us.value_or(0)));
      return;
  }
}

void Replayer::start_compute(Ref x, Ref by) {
  const TraceNode& n = node(x);
  NodeState& s = state(x);
  s.start = now_;
  s.started = true;
  s.released_by = by;
  ranks_[x.rank].running[n.cpu ? 1 : 0] = x.node;
  const double d = n.duration_us ? std::max(0.0, *n.duration_us) : priced_compute_us(n, topo_.device);
  schedule(x, now_ + d);
}

void Replayer::finish(Ref x) {
  NodeState& s = state(x);
  s.end = now_;
  s.done = true;
  RankState& r = ranks_[x.rank];
  ++r.finished;
  const TraceNode& n = node(x);
  if (n.kind == NodeKind::compute) {
    auto q = static_cast<size_t>(n.cpu ? 1 : 0);
    r.running[q] = kNone;
    if (!r.queue[q].empty()) {
      const uint32_t next = r.queue[q].front();
      r.queue[q].pop_front();
      start_compute(Ref{x.rank, next}, x);
    }
  }
  for (uint32_t c = r.child_begin[x.node]; c < r.child_begin[x.node + 1]; ++c) {
    const uint32_t child = r.children[c];
    if (--r.st[child].waits == 0) ready(Ref{x.rank, child}, x);
  }
}

ReplayResult Replayer::run() {
  for (uint32_t r = 0; r < ranks_.size(); ++r)
    for (uint32_t i = 0; i < ranks_[r].st.size(); ++i)
      if (ranks_[r].st[i].waits == 0) ready(Ref{r, i}, Ref{});
  std::vector<uint64_t> finished;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  for (;;) {
    const double th = heap_.empty() ? kInf : heap_.top().t;
    const double tn = net_->next_completion_us();
    if (th == kInf && tn == kInf) break;
    ++events_;
    if (th <= tn) {
      const Event e = heap_.top();
      heap_.pop();
      now_ = e.t;
      finish(Ref{e.rank, e.node});
      continue;
    }
    now_ = tn;
    finished.clear();
    net_->advance(tn, finished);
    for (uint64_t h : finished) on_call_done(h);
  }
  for (const RankState& r : ranks_)
    if (r.finished < r.st.size()) stuck();
  return collect();
}

}  // namespace detail

ReplayResult replay(const TraceSet& set, const Topology& topo, const ReplayOptions& options) {
  detail::Replayer r(set, topo, options);
  return r.run();
}

}  // namespace paralab::sim::replay
