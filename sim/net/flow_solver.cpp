// paralab — max-min fair flow solver by progressive filling (see flow_solver.hpp).
#include "sim/net/flow_solver.hpp"

#include <algorithm>
#include <cmath>

#include "ir/error.hpp"

namespace paralab::sim {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

FlowSolver::FlowSolver(std::vector<double> capacity_Bpus)
    : cap_(std::move(capacity_Bpus)),
      link_flows_(cap_.size()),
      link_mark_(cap_.size(), 0),
      frozen_load_(cap_.size(), 0.0),
      wsum_(cap_.size(), 0.0),
      unfrozen_(cap_.size(), 0) {}

uint32_t FlowSolver::add(std::span<const LinkLoad> loads, double bytes, uint64_t tag) {
  // A link of zero capacity may exist (an unused device-to-hub link on a one-device node)
  // but no flow may need it: it would never finish. Checked before any state changes.
  for (const LinkLoad& l : loads)
    if (l.link >= cap_.size() || !(l.weight > 0) || !(cap_[l.link] > 0))
      throw InternalError("FlowSolver::add: a flow crosses a link of zero capacity or has a "
                          "bad weight");
  uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = static_cast<uint32_t>(flows_.size());
    flows_.emplace_back();
    flow_mark_.push_back(0);
    flow_frozen_.push_back(0);
  }
  Flow& f = flows_[slot];
  f.loads = loads.data();
  f.nloads = static_cast<uint32_t>(loads.size());
  f.alive = true;
  f.bytes = f.remaining = std::max(bytes, 0.0);
  f.rate = 0;
  f.t_update_us = now_us_;
  f.seq = next_seq_++;
  f.tag = tag;
  ++f.version;
  ++active_;
  ++stats_.flows_added;
  if (f.nloads == 0 || f.remaining <= 0) {
    // Nothing to share (same device, or an empty message): done now.
    f.rate = kInf;
    f.remaining = 0;
    done_.push(Done{now_us_, f.seq, slot, f.version});
    return slot;
  }
  for (uint32_t i = 0; i < f.nloads; ++i) link_flows_[f.loads[i].link].push_back(Entry{slot, f.gen});
  dirty_flows_.push_back(Entry{slot, f.gen});
  return slot;
}

double FlowSolver::next_completion_us() {
  settle();
  drop_stale();
  return done_.empty() ? kInf : std::max(done_.top().t_us, now_us_);
}

void FlowSolver::advance(double t_us, std::vector<FinishedFlow>& finished) {
  if (t_us < now_us_) t_us = now_us_;
  for (;;) {
    settle();
    drop_stale();
    if (done_.empty() || done_.top().t_us > t_us + time_tie_eps(t_us)) break;
    // Every flow completing at (or within rounding of) the earliest time is one event.
    const double te = std::max(now_us_, std::min(done_.top().t_us, t_us));
    now_us_ = te;
    while (!done_.empty()) {
      const Done d = done_.top();
      if (!valid(d)) {
        done_.pop();
        continue;
      }
      if (d.t_us > te + time_tie_eps(te)) break;
      done_.pop();
      finish(d.slot, finished);
    }
  }
  now_us_ = std::max(now_us_, t_us);
}

double FlowSolver::rate_Bpus(uint32_t id) {
  settle();
  return flows_.at(id).alive ? flows_[id].rate : 0.0;
}

double FlowSolver::remaining_bytes(uint32_t id) {
  settle();
  const Flow& f = flows_.at(id);
  if (!f.alive || std::isinf(f.rate)) return 0.0;
  return std::max(0.0, f.remaining - f.rate * (now_us_ - f.t_update_us));
}

void FlowSolver::finish(uint32_t slot, std::vector<FinishedFlow>& out) {
  Flow& f = flows_[slot];
  if (check_ && f.nloads > 0 && f.bytes > 0)
    check_flow_drained(f.tag, f.bytes, f.remaining - f.rate * (now_us_ - f.t_update_us), f.rate, now_us_);
  f.alive = false;
  ++f.gen;
  --active_;
  ++stats_.flows_finished;
  for (uint32_t i = 0; i < f.nloads; ++i) dirty_links_.push_back(f.loads[i].link);
  out.push_back(FinishedFlow{slot, f.tag, f.bytes});
  free_.push_back(slot);
}

void FlowSolver::drop_stale() {
  while (!done_.empty() && !valid(done_.top())) done_.pop();
  // Re-solves leave superseded entries deep in the heap; rebuild when they dominate.
  if (done_.size() > 4 * active_ + 1024) {
    std::vector<Done> keep;
    keep.reserve(active_);
    while (!done_.empty()) {
      if (valid(done_.top())) keep.push_back(done_.top());
      done_.pop();
    }
    done_ = decltype(done_)(std::greater<>(), std::move(keep));
  }
}

void FlowSolver::settle() {
  if (dirty_flows_.empty() && dirty_links_.empty()) return;
  ++stats_.settles;
  ++epoch_;
  // Seeds: newly started flows, and the links of finished ones (their neighbours speed up).
  // Each connected component is solved once, whichever seed reaches it first.
  for (const Entry& e : dirty_flows_) {
    const Flow& f = flows_[e.slot];
    if (!f.alive || f.gen != e.gen || flow_mark_[e.slot] == epoch_) continue;
    comp_flows_.clear();
    comp_links_.clear();
    flow_mark_[e.slot] = epoch_;
    comp_flows_.push_back(e.slot);
    collect_component();
    solve_component();
  }
  for (LinkId l : dirty_links_) {
    if (link_mark_[l] == epoch_) continue;
    comp_flows_.clear();
    comp_links_.clear();
    collect_from_link(l);
    if (comp_flows_.empty()) continue;
    collect_component();
    solve_component();
  }
  dirty_flows_.clear();
  dirty_links_.clear();
}

void FlowSolver::collect_from_link(LinkId l) {
  if (link_mark_[l] == epoch_) return;
  link_mark_[l] = epoch_;
  comp_links_.push_back(l);
  // Drop finished flows from the list while walking it (order of survivors is kept).
  auto& list = link_flows_[l];
  size_t w = 0;
  for (const Entry& e : list) {
    const Flow& f = flows_[e.slot];
    if (!f.alive || f.gen != e.gen) continue;
    list[w++] = e;
    if (flow_mark_[e.slot] != epoch_) {
      flow_mark_[e.slot] = epoch_;
      comp_flows_.push_back(e.slot);
    }
  }
  list.resize(w);
}

void FlowSolver::collect_component() {
  // Breadth-first over flows; comp_flows_ doubles as the queue.
  for (size_t i = 0; i < comp_flows_.size(); ++i) {
    const Flow& f = flows_[comp_flows_[i]];
    for (uint32_t k = 0; k < f.nloads; ++k) collect_from_link(f.loads[k].link);
  }
}

void FlowSolver::solve_component() {
  ++stats_.resolves;
  stats_.flow_visits += comp_flows_.size();
  for (LinkId l : comp_links_) {
    frozen_load_[l] = 0;
    wsum_[l] = 0;
    unfrozen_[l] = 0;
  }
  for (uint32_t s : comp_flows_) {
    const Flow& f = flows_[s];
    stats_.load_visits += f.nloads;
    for (uint32_t k = 0; k < f.nloads; ++k) {
      wsum_[f.loads[k].link] += f.loads[k].weight;
      ++unfrozen_[f.loads[k].link];
    }
  }
  fill_heap_.clear();
  for (LinkId l : comp_links_)
    if (unfrozen_[l] > 0) fill_heap_.push_back(Fill{cap_[l] / wsum_[l], l});
  std::make_heap(fill_heap_.begin(), fill_heap_.end(), std::greater<>());

  size_t left = comp_flows_.size();
  while (left > 0 && !fill_heap_.empty()) {
    std::pop_heap(fill_heap_.begin(), fill_heap_.end(), std::greater<>());
    const Fill top = fill_heap_.back();
    fill_heap_.pop_back();
    const LinkId l = top.link;
    if (unfrozen_[l] == 0) continue;
    // Levels only rise as flows freeze elsewhere; a stale entry is re-queued at its new level.
    const double level = std::max(0.0, (cap_[l] - frozen_load_[l]) / wsum_[l]);
    if (level > top.level * (1 + 1e-12)) {
      fill_heap_.push_back(Fill{level, l});
      std::push_heap(fill_heap_.begin(), fill_heap_.end(), std::greater<>());
      continue;
    }
    // l is the bottleneck: every unfrozen flow crossing it gets `level`.
    for (const Entry& e : link_flows_[l]) {
      if (flow_frozen_[e.slot] == epoch_) continue;
      flow_frozen_[e.slot] = epoch_;
      --left;
      set_rate(e.slot, level);
      const Flow& f = flows_[e.slot];
      for (uint32_t k = 0; k < f.nloads; ++k) {
        const LinkId m = f.loads[k].link;
        frozen_load_[m] += f.loads[k].weight * level;
        wsum_[m] -= f.loads[k].weight;
        if (--unfrozen_[m] == 0) wsum_[m] = 0;
      }
    }
  }
  if (left != 0) throw InternalError("FlowSolver: progressive filling left flows unfrozen");
  if (check_) check_component_loads();
}

void FlowSolver::check_component_loads() {
  // Recomputed from the flows' final rates, independently of the filling's own bookkeeping.
  check_load_.resize(cap_.size(), 0.0);
  for (LinkId l : comp_links_) check_load_[l] = 0;
  for (uint32_t s : comp_flows_) {
    const Flow& f = flows_[s];
    for (uint32_t k = 0; k < f.nloads; ++k) check_load_[f.loads[k].link] += f.loads[k].weight * f.rate;
  }
  check_link_loads(cap_, comp_links_, check_load_);
}

void FlowSolver::set_rate(uint32_t slot, double rate) {
  Flow& f = flows_[slot];
  if (f.rate == rate) return;  // unchanged: its completion entry stays valid
  if (f.rate > 0) f.remaining = std::max(0.0, f.remaining - f.rate * (now_us_ - f.t_update_us));
  f.t_update_us = now_us_;
  f.rate = rate;
  ++f.version;
  const double t = rate > 0 ? now_us_ + f.remaining / rate : kInf;
  if (t < kInf) done_.push(Done{t, f.seq, slot, f.version});
}

}  // namespace paralab::sim
