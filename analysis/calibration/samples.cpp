// paralab — samples of the executor's host-side costs from a real execution (in_situ.hpp).
#include "analysis/in_situ.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>

#include "analysis/compute_activity.hpp"
#include "results/comm_alignment.hpp"
#include "ir/error.hpp"

namespace paralab::calib {

CommPattern pattern_of(CollKind k) {
  switch (k) {
    case CollKind::all_reduce: return CommPattern::all_reduce;
    case CollKind::all_gather: return CommPattern::all_gather;
    case CollKind::reduce_scatter: return CommPattern::reduce_scatter;
    case CollKind::all_to_all: return CommPattern::all_to_all;
    case CollKind::broadcast: return CommPattern::broadcast;
  }
  return CommPattern::all_reduce;
}

double trimmed_mean(std::vector<double> v, double trim) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const auto cut = static_cast<size_t>(std::floor(trim * static_cast<double>(v.size())));
  double sum = 0;
  size_t n = 0;
  for (size_t i = cut; i + cut < v.size(); ++i, ++n) sum += v[i];
  return n ? sum / static_cast<double>(n) : v[v.size() / 2];
}

std::vector<double> arrival_waits(const std::vector<Arrival>& arrivals) {
  std::vector<double> waits;
  waits.reserve(arrivals.size());
  for (const Arrival& a : arrivals) waits.push_back(a.wait_us);
  return waits;
}

double median_execution_wait(const std::vector<Arrival>& arrivals, double trim, size_t* executions) {
  std::map<int, std::vector<double>> by_execution;
  for (const Arrival& a : arrivals) by_execution[a.execution].push_back(a.wait_us);
  std::vector<double> means;
  means.reserve(by_execution.size());
  for (auto& [e, waits] : by_execution) means.push_back(trimmed_mean(std::move(waits), trim));
  if (executions) *executions = means.size();
  return means.empty() ? 0.0 : quantile(means, 0.5);
}

std::vector<double> awake_acks(const std::vector<InSituSamples::Ack>& acks, double spin_us, size_t min_awake) {
  std::vector<double> awake, all;
  for (const InSituSamples::Ack& a : acks) {
    all.push_back(a.ack_us);
    if (spin_us <= 0 || a.sender_wait_us <= spin_us) awake.push_back(a.ack_us);
  }
  return awake.size() >= min_awake ? awake : all;
}

DriftFit fit_drift(const std::vector<Arrival>& arrivals, double spin_us, double trim) {
  DriftFit f;
  if (arrivals.empty()) return f;
  std::vector<size_t> order(arrivals.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return arrivals[a].wait_us < arrivals[b].wait_us || (arrivals[a].wait_us == arrivals[b].wait_us && a < b);
  });
  const auto keep = order.size() - static_cast<size_t>(std::floor(trim * static_cast<double>(order.size())));
  double wait = 0, since = 0;
  for (size_t i = 0; i < keep; ++i) {
    wait += arrivals[order[i]].wait_us;
    since += arrivals[order[i]].since_us;
  }
  f.rate = since > 0 ? wait / since : 0.0;
  if (spin_us <= 0) {
    f.right = f.right_awake = f.right_twice = 1.0;
    return f;
  }
  // Weighted members, sorted by their time since compute last waited (see DriftFit).
  struct Member {
    double since_us, w;
    bool asleep;
  };
  std::vector<Member> m;
  m.reserve(arrivals.size());
  double awake = 0, all = 0, twice = 0;
  for (const Arrival& a : arrivals) {
    const bool asleep = a.spread_us > spin_us;
    const double w = 1.0 / std::max(a.time_us, 1.0);
    m.push_back({a.since_us, w, asleep});
    awake += asleep ? 0.0 : w;
    twice += (2.0 * f.rate * a.since_us > spin_us) == asleep ? w : 0.0;
    all += w;
  }
  std::stable_sort(m.begin(), m.end(), [](const Member& a, const Member& b) { return a.since_us < b.since_us; });
  // The threshold T (asleep: since > T) that classifies the most weight right, lowered from
  // above the largest time (none asleep) past one distinct time at a time; a tie keeps the
  // higher T (fewer sleepers). spread = spin / T.
  double best = awake, right = awake, best_t = 0;
  for (size_t i = m.size(); i-- > 0;) {
    right += m[i].asleep ? m[i].w : -m[i].w;  // m[i] now predicted asleep
    if (i > 0 && m[i - 1].since_us == m[i].since_us) continue;
    const double t = i > 0 ? 0.5 * (m[i - 1].since_us + m[i].since_us) : 0.5 * m[i].since_us;
    if (t > 0 && right > best * (1 + 1e-12)) {
      best = right;
      best_t = t;
    }
  }
  f.spread = best_t > 0 ? spin_us / best_t : 0.0;
  f.right = best / all;
  f.right_awake = awake / all;
  f.right_twice = twice / all;
  return f;
}

namespace {

// Clock differences below this are timer noise (us): a start a hair before the end it waited
// for is a zero gap, not a sample to drop.
constexpr double kClockSlackUs = 1.0;

}  // namespace

void collect_in_situ(const StepIR& ir, const StepResult& measured, const std::string& origin, InSituSamples& out,
                     double turns) {
  if (!(turns >= 1.0)) throw InternalError("in-situ calibration: turns " + std::to_string(turns) + " below 1");
  out.turns = std::max(out.turns, turns);
  // Per rank: op id -> index into measured.ops (the result is sorted by (rank, op)).
  std::map<int64_t, std::vector<size_t>> at;
  for (size_t i = 0; i < measured.ops.size(); ++i) {
    const OpTiming& t = measured.ops[i];
    if (t.rank < 0 || t.rank >= ir.layout.world())
      throw InternalError("in-situ calibration: a measured op of rank " + std::to_string(t.rank) + " outside the layout");
    const StepGraph& g = ir.graph_for(t.rank);
    auto& v = at[t.rank];
    if (v.empty()) v.assign(g.ops.size(), SIZE_MAX);
    if (t.op >= g.ops.size()) throw InternalError("in-situ calibration: measured op " + std::to_string(t.op) + " not in the graph");
    v[t.op] = i;
  }

  // 1. Gaps between an op's last constraint and its start, on each rank's own clock; and per
  // rank the times its compute stream waited for a call (sorted below).
  std::map<int64_t, std::vector<double>> synced;
  // When each rank computed, and the dispatch gaps to bin by the ranks computing as they began.
  ComputeActivity activity(ir.layout);
  struct Gap {
    int64_t rank;
    double at_us, us;
  };
  std::vector<Gap> dispatch_gaps;
  for (const auto& [rank, idx] : at) {
    const StepGraph& g = ir.graph_for(rank);
    std::vector<OpId> pred(g.ops.size(), kNoOp);
    for (const auto& stream : g.streams)
      for (size_t i = 1; i < stream.size(); ++i) pred[stream[i]] = stream[i - 1];
    auto timing = [&](OpId id) -> const OpTiming* { return idx[id] == SIZE_MAX ? nullptr : &measured.ops[idx[id]]; };
    // The rank's calls' ends, sorted: a compute op that waited for a call resumes after the
    // last call its rank ran before it, not only the one it waited for (the worker of a call
    // posted after it, a second all-gather on the same stream, takes the core first; the
    // simulator has that as the call's hold of the core: sim/engine/engine_cores.cpp).
    std::vector<double> comm_ends;
    for (const Op& op : g.ops)
      if (is_comm(op.kind))
        if (const OpTiming* t = timing(op.id)) comm_ends.push_back(t->end_us);
    std::sort(comm_ends.begin(), comm_ends.end());
    auto last_call_end = [&](double before) {
      const auto up = std::upper_bound(comm_ends.begin(), comm_ends.end(), before + kClockSlackUs);
      return up == comm_ends.begin() ? -1e300 : *std::prev(up);
    };
    for (const Op& op : g.ops) {
      const OpTiming* t = timing(op.id);
      if (!t) continue;
      double same = -1e300, other = -1e300;
      bool other_comm = false;  // the latest cross-stream dependency is a communication op
      if (pred[op.id] != kNoOp)
        if (const OpTiming* p = timing(pred[op.id])) same = p->end_us;
      for (OpId d : op.deps) {
        const OpTiming* p = timing(d);
        if (!p) continue;
        const bool on_same = g.ops[d].stream == op.stream;
        double& slot = on_same ? same : other;
        if (!on_same && p->end_us > other) other_comm = is_comm(g.ops[d].kind);
        slot = std::max(slot, p->end_us);
      }
      const bool cross = other > same;
      // The rank computes through a compute op, and through the gap before it when its stream
      // predecessor was the last thing it waited for (the thread goes from op to op).
      if (op.stream == Stream::compute) {
        activity.add(rank, t->start_us, t->end_us);
        if (same != -1e300 && !cross) activity.add(rank, same, t->start_us);
      }
      if (same == -1e300 && other == -1e300) continue;  // the first op of its stream
      // The compute stream waited for a call: the rank resumes compute there (the simulator's
      // StageState::synced_at, set the same way).
      if (cross && other_comm && op.stream == Stream::compute) synced[rank].push_back(other);
      const double gap = t->start_us - std::max(same, other);
      if (gap < -kClockSlackUs) continue;  // clocks disagree: no sample
      // Two hand-offs: the compute worker woken by a call's end, a communication worker woken
      // by compute (or by another stream's call); DeviceSpec says why they differ. A compute
      // op's gap less the turns the simulator's core pool waits before it by itself.
      const double pool_us = op.stream == Stream::compute ? (turns - 1.0) * (t->end_us - t->start_us) : 0.0;
      if (cross && op.stream == Stream::compute)
        out.compute_handoff_us.push_back(std::max(0.0, t->start_us - std::max(other, last_call_end(t->start_us))) - pool_us);
      else if (cross) out.handoff_us.push_back(std::max(0.0, gap));
      else if (op.stream == Stream::compute) {
        out.dispatch_us.push_back(std::max(0.0, gap) - pool_us);
        dispatch_gaps.push_back({rank, same, out.dispatch_us.back()});
      }
    }
  }

  activity.finish();
  for (const Gap& g : dispatch_gaps) out.dispatch_by_busy_us[activity.busy_ranks(g.rank, g.at_us)].push_back(g.us);

  for (auto& [rank, v] : synced) std::sort(v.begin(), v.end());
  // How long before `t` (rank's clock, us) its compute stream last waited for a call: since the
  // step began if it never did.
  auto since_synced = [&](const OpTiming& t) {
    const auto it = synced.find(t.rank);
    double from = 0;
    if (it != synced.end()) {
      const auto up = std::upper_bound(it->second.begin(), it->second.end(), t.start_us);
      if (up != it->second.begin()) from = *std::prev(up);
    }
    return std::max(0.0, t.start_us - from);
  };
  // The earliest original post among the members of a call within a stage (they run the same
  // op id): its last arrival minus this is the call's spread.
  auto first_post = [&](const OpTiming& t, OpId op, const std::vector<int64_t>& group) {
    double first = t.start_us;
    for (int64_t m : group) {
      const auto it = at.find(m);
      if (it == at.end() || op >= it->second.size() || it->second[op] == SIZE_MAX) continue;
      first = std::min(first, measured.ops[it->second[op]].start_us);
    }
    return first;
  };

  // 2. Compute ops under their keys.
  auto& sums = out.compute_by_execution.emplace_back();
  for (const OpTiming& t : measured.ops) {
    const Op& op = ir.graph_for(t.rank).op(t.op);
    if (is_comm(op.kind)) continue;
    const double us = t.end_us - t.start_us;
    if (us <= 0) continue;
    const OpKey key = op_key(op);
    OpSamples& s = out.compute[key];
    if (s.us.empty()) {
      s.key = key;
      s.flops = op.flops;
      s.bytes = op.bytes;
      const AttentionAttrs* a = op.attention();
      s.exec_flops = op.flops * (a && a->causal ? 0.5 : 1.0);
      s.origin = origin;
    }
    s.us.push_back(us);
    sums[key].us += us;
    ++sums[key].n;
  }

  // 3. Communication from the last participant's arrival.
  // Every call as its rank posted it (raw start to end), with its node, stage and group kind:
  // what else was in flight on a collective's node when its last member arrived.
  struct Flight {
    int64_t node, stage;
    GroupKind group;
    double post_us, end_us;
  };
  std::vector<Flight> flights;
  for (const OpTiming& t : measured.ops) {
    const Op& op = ir.graph_for(t.rank).op(t.op);
    if (!is_comm(op.kind)) continue;
    const GroupKind g = op.collective() ? op.collective()->group : op.p2p()->group;
    flights.push_back({ir.layout.node_of(t.rank), ir.layout.stage_of(t.rank), g, t.start_us, t.end_us});
  }
  // The latest post before `at_us` among the calls of another group kind or stage on `rank`'s
  // node still in flight at `at_us`: `at_us` minus it (us), or -1 for none. A post at `at_us` itself
  // counts, as in the simulator (sim/engine/engine_comm.cpp, contended_now).
  auto contended_since = [&](int64_t rank, GroupKind g, double at_us) {
    const int64_t node = ir.layout.node_of(rank), stage = ir.layout.stage_of(rank);
    double since = -1;
    for (const Flight& f : flights)
      if (f.node == node && (f.group != g || f.stage != stage) && f.post_us <= at_us && at_us < f.end_us)
        since = since < 0 ? at_us - f.post_us : std::min(since, at_us - f.post_us);
    return since;
  };
  // Each rank's compute ops as executed (start, end; us), in start order: what ran beside a call.
  std::map<int64_t, std::vector<std::pair<double, double>>> computed;
  for (const OpTiming& t : measured.ops)
    if (!is_comm(ir.graph_for(t.rank).op(t.op).kind)) computed[t.rank].push_back({t.start_us, t.end_us});
  for (auto& [rank, v] : computed) std::sort(v.begin(), v.end());
  // Whether `rank` computed at some time in (from_us, to_us).
  auto computed_during = [&](int64_t rank, double from_us, double to_us) {
    const auto it = computed.find(rank);
    if (it == computed.end()) return false;
    for (const auto& [s, e] : it->second) {
      if (s >= to_us) break;
      if (e > from_us) return true;
    }
    return false;
  };
  StepResult aligned = measured;
  const std::vector<size_t> partner = transfer_partners(measured, ir);
  align_comm_starts(aligned, ir, partner);
  for (size_t i = 0; i < aligned.ops.size(); ++i) {
    const OpTiming& t = aligned.ops[i];
    const Op& op = ir.graph_for(t.rank).op(t.op);
    if (!is_comm(op.kind)) continue;
    const std::vector<int64_t> group = ir.group_of(t.rank, op);
    const auto members = static_cast<int64_t>(group.size());
    if (members < 2) continue;
    CommSample c;
    const double waited = std::max(0.0, t.start_us - measured.ops[i].start_us);
    c.waited_us = c.spread_us = waited;
    // A collective or ring shift within the stage: its members' arrival skew and spread.
    const bool in_stage = op.kind == OpKind::sendrecv || (op.collective() && within_stage(op.collective()->group));
    if (in_stage) {
      if (op.collective()) {
        c.contended_since_us = contended_since(t.rank, op.collective()->group, t.start_us);
        c.beside_compute = computed_during(t.rank, t.start_us, t.end_us);
      }
      c.spread_us = std::max(waited, t.start_us - first_post(measured.ops[i], op.id, group));
      out.arrivals.push_back({waited, since_synced(measured.ops[i]), c.spread_us, t.end_us - t.start_us, out.executions});
    }
    if (const auto* col = op.collective()) {
      c.pattern = pattern_of(col->kind);
      c.group = members;
      c.bytes = static_cast<double>(col->bytes);
      c.call_class = CallClass{col->kind, col->group, op.phase};
    } else if (op.kind == OpKind::send) {
      // Its end is the acknowledgement's arrival; the transfer itself is timed by its receive.
      if (partner[i] != SIZE_MAX) {
        const double recv_end_us = aligned.ops[partner[i]].end_us;
        out.acks.push_back({std::max(0.0, t.end_us - recv_end_us), std::max(0.0, recv_end_us - measured.ops[i].start_us)});
      }
      continue;
    } else {
      c.pattern = CommPattern::send_recv;  // a transfer moves its bytes between two ranks
      c.group = 2;
      c.bytes = static_cast<double>(op.p2p()->bytes);
    }
    if (c.bytes <= 0) continue;
    c.time_us = t.end_us - t.start_us;
    if (c.time_us <= 0) continue;
    c.rank = t.rank;
    c.op = static_cast<int64_t>(t.op);
    c.execution = static_cast<int64_t>(out.executions);
    out.comm.push_back(c);
  }
  ++out.executions;
}

}  // namespace paralab::calib
