// paralab — the discrete-event engine (semantics in engine.hpp, docs/simulator.md "Engine").
//
// Per stage the graph is flattened once into arrays: the compute model's durations, a count
// of what each op waits for (its deps plus its stream predecessor) and the reverse edges (CSR).
// An op whose count reaches zero starts at the current time. Compute ops schedule their
// completion in a binary heap of (time, sequence) events; communication ops become network
// calls whose completions the NetworkModel reports. The main loop takes whichever comes first
// (engine events first at equal times). Nothing is allocated per event beyond amortized vector
// growth; group member lists and call requests are built once per (stage, group kind).
//
// Compute beside communication: while communication kernels run on a rank they hold SMs
// (CollectiveSpec::intra_sms / inter_sms / p2p_sms), and the rank's compute ops progress at
// rate (SMs - held) / SMs of the compute model's speed. Each running compute op keeps the work
// it has left (in microseconds at full speed); when the held SMs change, its completion is
// rescheduled and the superseded heap event is skipped (its sequence number is no longer the
// op's). On a CPU host (DeviceKind::cpu) whose ranks each own their cores a communication
// thread moving data takes a core instead: rate = max(0, cores - busy threads) / cores, and at
// 0 compute waits for its core (core_share.hpp, engine_cores.cpp). With more ranks than the
// node has cores, the node's cores are a pool (core_pool.hpp): a compute op waits for a core,
// then runs at full speed. Without SMs or shared cores configured, compute durations are fixed.
//
// Measured corrections (overhead.hpp) are resolved per op when a stage is set up: a compute
// op's duration and a call's time are corrected, and an op released by its stream predecessor
// (a dependency on another stream) starts its dispatch (hand-off) gap later.
#include "sim/engine/engine.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "ir/error.hpp"
#include "sim/engine/engine_state.hpp"

namespace paralab::sim {

double RankMemory::resident_total() const {
  double t = 0;
  for (double x : resident) t += x;
  return t;
}

namespace detail {

const GraphIndex& Engine::graph_index(int64_t stage) {
  GraphIndex& x = index_.at(static_cast<size_t>(stage));
  if (!x.dep_begin.empty()) return x;
  const StepGraph& g = ir_.stages[static_cast<size_t>(stage)];
  const size_t n = g.ops.size();
  x.buffer_bytes.resize(g.buffers.size());
  for (size_t b = 0; b < g.buffers.size(); ++b) x.buffer_bytes[b] = static_cast<double>(g.buffers[b].bytes());
  x.waiting0.assign(n, 0);
  x.dep_begin.assign(n + 1, 0);
  // Stream predecessors count as dependencies (CUDA stream order).
  std::vector<OpId> next_on_stream(n, kNoOp);
  for (const auto& stream : g.streams)
    for (size_t i = 1; i < stream.size(); ++i) next_on_stream[stream[i - 1]] = stream[i];
  for (size_t i = 0; i < n; ++i) {
    const Op& op = g.ops[i];
    if (op.id != i) throw InternalError("engine: stage " + std::to_string(stage) + " op ids are not indexes");
    x.waiting0[i] += static_cast<uint32_t>(op.deps.size());
    for (OpId d : op.deps) {
      if (d >= n) throw InternalError("engine: op " + op.full_name() + " depends on a missing op");
      ++x.dep_begin[d + 1];
    }
    if (next_on_stream[i] != kNoOp) {
      ++x.waiting0[next_on_stream[i]];
      ++x.dep_begin[i + 1];
    }
  }
  for (size_t i = 0; i < n; ++i) x.dep_begin[i + 1] += x.dep_begin[i];
  x.dependents.assign(x.dep_begin[n], 0);
  std::vector<uint32_t> fill(x.dep_begin.begin(), x.dep_begin.end() - 1);
  for (size_t i = 0; i < n; ++i) {
    for (OpId d : g.ops[i].deps) x.dependents[fill[d]++] = static_cast<OpId>(i);
    if (next_on_stream[i] != kNoOp) x.dependents[fill[i]++] = next_on_stream[i];
  }
  return x;
}

const std::vector<double>& Engine::base_durations(int64_t stage, uint32_t model) {
  auto [it, fresh] = base_dur_.try_emplace({stage, model});
  if (fresh) it->second = models_.at(model)->durations(ir_.stages[static_cast<size_t>(stage)]);
  return it->second;
}

void Engine::init_stage(StageState& st, int64_t stage, const RankClass* cls) {
  const StepGraph& g = ir_.stages[static_cast<size_t>(stage)];
  st.g = &g;
  st.stage = stage;
  st.cls = cls;
  st.rank = cls ? cls->rep : ir_.layout.representative(stage);
  const size_t n = g.ops.size();
  st.op.assign(n, StageState::OpState{});
  const std::vector<double>& base = base_durations(stage, cls ? cls->hardware.compute_model : 0);
  for (size_t i = 0; i < n; ++i) st.op[i].dur = base[i];
  st.over = stage_overheads(ir_, g, st.rank);
  for (size_t i = 0; i < st.over.size(); ++i)
    if (!is_comm(g.ops[i].kind)) st.op[i].dur = std::max(0.0, st.over[i].time.apply(st.op[i].dur));
  // A class's hardware slows the op as it runs on the device, its measured correction included.
  if (cls) {
    const std::vector<double>& work = cls->hardware.attention_work;  // per micro-batch; empty: 1
    for (size_t i = 0; i < n; ++i) {
      const Op& op = g.ops[i];
      if (off_device(op.stream)) continue;  // the host's copies and cores are not the GPU's speed
      st.op[i].dur *= cls->hardware.slowdown[static_cast<size_t>(op.kind)];
      if (!work.empty() && op.microbatch >= 0 && static_cast<size_t>(op.microbatch) < work.size() &&
          scales_with_attention(op.kind))
        st.op[i].dur *= work[static_cast<size_t>(op.microbatch)];
    }
  }
  st.idx = &graph_index(stage);
  for (size_t i = 0; i < n; ++i) {
    st.op[i].waiting = st.idx->waiting0[i];
    st.op[i].comm = is_comm(g.ops[i].kind) ? 1 : 0;
  }
  if (slow_) st.intra_node.fill(-1);
  if (check_) {
    for (size_t i = 0; i < n; ++i) check_duration(stage, g.ops[i], st.op[i].dur);
    st.starts_n.assign(n, 0);
    st.finishes_n.assign(n, 0);
    st.buf_state.assign(g.buffers.size(), BufferState::unallocated);
  }
  st.mem = RankMemory{};
  st.mem.rank = st.rank;
  st.mem.stage = stage;
  for (size_t b = 0; b < g.buffers.size(); ++b) {
    const Buffer& buf = g.buffers[b];
    if (buf.host) st.mem.host_resident += st.idx->buffer_bytes[b];
    else if (buf.resident) st.mem.resident[static_cast<size_t>(buf.category)] += st.idx->buffer_bytes[b];
  }
  if (st.mem.resident_total() > capacity_) {
    st.mem.over_capacity_us = 0.0;
    st.mem.over_capacity_op = n ? g.ops[0].id : 0;
  }
}

void Engine::make_ready(uint32_t s, OpId id) {
  StageState& st = stages_[s];
  const Op& op = st.g->ops[id];
  st.op[id].start = now_;
  st.op[id].posted = now_;
  if (check_ && ++st.starts_n[id] > 1)
    invariant_violated("ops run once", "stage " + std::to_string(st.stage) + " op " + op.full_name() + " started twice");
  // Memory: allocations happen when the op starts (a transfer: when it is posted).
  if (!op.allocs.empty()) {
    for (BufferId b : op.allocs) {
      if (check_) check_buffer_transition(*st.g, b, st.buf_state[b], true, op, st.stage);
      const double bytes = st.idx->buffer_bytes[b];
      st.live[static_cast<size_t>(st.g->buffers[b].category)] += bytes;
      st.live_total += bytes;
    }
    if (st.live_total > st.mem.peak_transient) {
      st.mem.peak_transient = st.live_total;
      st.mem.peak_time_us = now_;
      st.mem.peak_op = id;
      st.mem.at_peak = st.live;
      if (!st.mem.over_capacity_us && st.mem.resident_total() + st.live_total > capacity_) {
        st.mem.over_capacity_us = now_;
        st.mem.over_capacity_op = id;
      }
    }
  }
  // Its dependents' state is touched when it finishes: fetch it now, while the op runs (per-rank
  // mode interleaves thousands of units, whose arrays do not stay in cache).
  const GraphIndex& x = *st.idx;
  for (uint32_t e = x.dep_begin[id]; e < x.dep_begin[id + 1]; ++e) __builtin_prefetch(&st.op[x.dependents[e]], 1);
  if (is_comm(op.kind)) start_comm(s, id);
  else start_compute(s, id);
}

void Engine::finish(uint32_t s, OpId id) {
  StageState& st = stages_[s];
  const Op& op = st.g->ops[id];
  st.op[id].end = now_;
  st.op[id].done = 1;
  if (slow_) {
    if (st.op[id].holds) release_sms(s, id);
    else if (!is_comm(op.kind)) compute_done(s, id);
  }
  if (pool_) release_core(s, id);
  if (check_ && ++st.finishes_n[id] > 1)
    invariant_violated("ops run once", "stage " + std::to_string(st.stage) + " op " + op.full_name() + " finished twice");
  for (BufferId b : op.frees) {
    if (check_) check_buffer_transition(*st.g, b, st.buf_state[b], false, op, st.stage);
    const double bytes = st.idx->buffer_bytes[b];
    st.live[static_cast<size_t>(st.g->buffers[b].category)] -= bytes;
    st.live_total -= bytes;
  }
  ++st.finished;
  const GraphIndex& x = *st.idx;
  for (uint32_t e = x.dep_begin[id]; e < x.dep_begin[id + 1]; ++e) {
    const OpId d = x.dependents[e];
    if (--st.op[d].waiting == 0) {
      st.op[d].pred_unit = s;
      st.op[d].pred_op = id;
      release(s, d, id);
    }
  }
}

// An op whose last constraint was its stream predecessor starts its dispatch gap later, one
// released by a dependency on another stream its hand-off gap later (the framework's host
// work between ops and its hand-over to the waiting stream; rows of the correction table,
// overhead.hpp). Without corrections it starts now, as CUDA streams do.
void Engine::release(uint32_t s, OpId id, OpId after) {
  StageState& st = stages_[s];
  if (st.over.empty()) {
    make_ready(s, id);
    return;
  }
  const bool same = st.g->ops[id].stream == st.g->ops[after].stream;
  const double delay = same ? st.over[id].dispatch_us : st.over[id].handoff_us;
  if (delay > 0) heap_.push(Event{now_ + delay, seq_++, s, id, EventKind::start});
  else make_ready(s, id);
}

void Engine::report_deadlock() const {
  std::string msg = "engine: the step cannot complete (dependency cycle or unmatched communication):";
  for (const StageState& st : stages_) {
    if (st.finished == st.g->ops.size()) continue;
    msg += "\n  stage " + std::to_string(st.stage) + ": " + std::to_string(st.g->ops.size() - st.finished) +
           " ops never ran; stream heads:";
    for (int s = 0; s < kStreams; ++s)
      for (OpId id : st.g->streams[static_cast<size_t>(s)])
        if (!st.op[id].done) {
          msg += " " + std::string(to_string(static_cast<Stream>(s))) + "=" + st.g->ops[id].full_name() + " (waits for " +
                 std::to_string(st.op[id].waiting) + ")";
          break;
        }
  }
  throw InternalError(msg);
}

void Engine::check_end_of_step() const {
  std::vector<std::string> unmatched;
  for (size_t i = 0; i < p2p_dense_.size(); ++i)
    if (p2p_dense_[i].stage != kNone)
      unmatched.push_back("pipeline tag " + std::to_string(kTagP2PBase + i) + " (" +
                          stages_[p2p_dense_[i].stage].g->ops[p2p_dense_[i].op].full_name() + ")");
  for (const auto& [key, h] : p2p_sparse_)
    if (h.stage != kNone)
      unmatched.push_back("pipeline tag " + std::to_string(key >> 32) + " (" + stages_[h.stage].g->ops[h.op].full_name() + ")");
  for (const auto& [key, a] : cross_)
    unmatched.push_back("collective " + std::to_string(std::get<2>(key)) + " of group kind " +
                        std::string(to_string(static_cast<GroupKind>(std::get<0>(key)))) + " joined by " +
                        std::to_string(a.parts.size()) + " of " + std::to_string(a.expected) + " units");
  for (uint32_t j : handle_join_)
    if (j != kNone) unmatched.push_back("a network call was never reported finished");
  check_all_matched(unmatched);
  for (const StageState& st : stages_) {
    check_ran_once(*st.g, st.starts_n, st.finishes_n, st.stage);
    std::vector<double> start, end;
    for (const StageState::OpState& o : st.op) {
      start.push_back(o.start);
      end.push_back(o.end);
    }
    check_causality(*st.g, start, end, st.stage);
    check_memory_steady(*st.g, st.buf_state, st.live, st.stage);
  }
  net_.check_drained();
  if (pool_ && !pool_->idle()) invariant_violated("cores returned", "a core of a shared node is still held or claimed at the end of the step");
}

void Engine::critical_path(EngineOutput& out) const {
  uint32_t u = kNone;
  OpId id = 0;
  double last = -1;
  for (uint32_t s = 0; s < stages_.size(); ++s)
    for (OpId i = 0; i < stages_[s].op.size(); ++i)
      if (stages_[s].op[i].end > last) last = stages_[s].op[i].end, u = s, id = i;
  std::vector<double> compute(stages_.size(), 0.0);
  // Walking back, each op counts until the start of the one it released (the members of a call
  // share its time: it counts once).
  double horizon = last;
  for (size_t steps = 0; u != kNone && steps <= total_ops_; ++steps) {
    const StageState& st = stages_[u];
    const StageState::OpState& o = st.op[id];
    const Op& op = st.g->ops[id];
    const double t = std::max(0.0, std::min(o.end, horizon) - o.start);
    horizon = std::min(horizon, o.start);
    if (!o.comm) compute[u] += t;
    else if (op.kind == OpKind::collective) out.critical_comm_us[static_cast<size_t>(op.collective()->group)] += t;
    else out.critical_comm_us[static_cast<size_t>(op.p2p()->group)] += t;
    const uint32_t pu = o.pred_unit;
    id = o.pred_op;
    u = pu;
  }
  for (uint32_t s = 0; s < stages_.size(); ++s)
    if (compute[s] > 0) out.critical_compute_us.emplace_back(stages_[s].rank, compute[s]);
  std::stable_sort(out.critical_compute_us.begin(), out.critical_compute_us.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
}

EngineOutput Engine::run() {
  check_ = opt_.check_invariants;
  const int64_t p = static_cast<int64_t>(ir_.stages.size());
  capacity_ = ir_.scenario.topology.device.memory_gib * kGiB;
  const RankClasses* classes = opt_.classes;
  stages_.resize(classes ? classes->classes.size() : static_cast<size_t>(p));
  models_.assign(1, &compute_);
  index_.assign(static_cast<size_t>(p), GraphIndex{});
  for (const ComputeModel* m : opt_.node_models) models_.push_back(m);
  const Topology& topo = ir_.scenario.topology;
  coll_ = topo.collectives;
  share_.emplace(ir_);
  slow_ = share_->mode() == CoreShare::Mode::sms || share_->mode() == CoreShare::Mode::rank_cores;
  if (share_->mode() == CoreShare::Mode::node_cores) pool_.emplace(share_->nodes(), share_->cores());
  corrected_ = !topo.calibration.corrections.empty();
  size_t total_ops = 0;
  for (size_t u = 0; u < stages_.size(); ++u) {
    const RankClass* cls = classes ? &classes->classes[u] : nullptr;
    init_stage(stages_[u], cls ? cls->stage : static_cast<int64_t>(u), cls);
    total_ops += stages_[u].g->ops.size();
  }
  total_ops_ = total_ops;
  // Pipeline tags: kTagP2PBase + 2 (mb * virtual_stages_total + receiver) + direction.
  const int64_t vs_total = ir_.layout.pp() * std::max<int64_t>(1, ir_.scenario.parallel.virtual_pipeline_stages);
  if (!classes) p2p_dense_.assign(static_cast<size_t>(2 * (ir_.scenario.num_microbatches() + 1) * vs_total + 2), Half{});
  joins_.reserve(total_ops / 4 + 16);
  parts_.reserve(total_ops / 4 + 16);
  req_.members.reserve(16);

  for (uint32_t s = 0; s < stages_.size(); ++s)
    for (OpId id = 0; id < stages_[s].g->ops.size(); ++id)
      if (stages_[s].op[id].waiting == 0) make_ready(s, id);

  std::vector<uint64_t> done;
  for (;;) {
    const double t_ev = heap_.empty() ? kInf : heap_.top().t;
    const double t_net = net_.next_completion_us();
    if (t_ev == kInf && t_net == kInf) break;
    if (t_net < t_ev) {
      if (check_) check_clock(now_, t_net, "network");
      done.clear();
      net_.advance(t_net, done);
      now_ = std::max(now_, t_net);
      ++events_;
      for (uint64_t h : done) on_call_done(h);
      continue;
    }
    const Event e = heap_.top();
    heap_.pop();
    if (!heap_.empty()) __builtin_prefetch(&stages_[heap_.top().stage].op[heap_.top().op]);  // the next event's op
    if (e.kind == EventKind::finish && slow_ && stale(e)) continue;  // superseded by a rescheduled completion
    if (check_) check_clock(now_, e.t, e.kind == EventKind::start ? "dispatch" : "compute");
    now_ = e.t;
    ++events_;
    if (e.kind == EventKind::start) make_ready(e.stage, e.op);
    else finish(e.stage, e.op);
  }
  for (const StageState& st : stages_)
    if (st.finished != st.g->ops.size()) report_deadlock();
  if (check_) check_end_of_step();

  EngineOutput out;
  critical_path(out);
  out.events = events_;
  out.ops_run = static_cast<int64_t>(total_ops);
  if (opt_.record_ops) out.ops.reserve(total_ops);
  // Ranks ascend with stages (the pipeline coordinate is the slowest), so (rank, op) order.
  for (const StageState& st : stages_) {
    for (OpId id = 0; id < st.g->ops.size(); ++id) {
      out.end_us = std::max(out.end_us, st.op[id].end);
      if (opt_.record_ops) out.ops.push_back(OpTiming{st.rank, id, st.op[id].start, st.op[id].end, st.op[id].posted});
    }
    out.ranks.push_back(RankStats{st.rank, st.stage, st.mem.peak_total(), st.mem.peak_time_us, st.mem.peak_op, Breakdown{},
                                  st.cls ? st.cls->ranks : 1});
    out.memory.push_back(st.mem);
  }
  return out;
}

}  // namespace detail

EngineOutput run_engine(const StepIR& ir, const ComputeModel& compute, NetworkModel& net, const EngineOptions& options) {
  detail::Engine e(ir, compute, net, options);
  return e.run();
}

}  // namespace paralab::sim
