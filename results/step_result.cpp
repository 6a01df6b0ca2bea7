// paralab — derived step figures, computed identically for predictions and measurements.
#include "results/step_result.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "ir/enum_names.hpp"
#include "results/comm_alignment.hpp"

namespace paralab {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Whether a communication op of group kind g waits on another pipeline stage when posted
// before its start: a transfer between stages, or a collective joining stages.
bool joins_pipeline_stages(GroupKind g) {
  return g == GroupKind::pp || g == GroupKind::embd || g == GroupKind::mp || g == GroupKind::world;
}
}  // namespace

// Length of the union of [a,b) intervals (sorted in place).
double union_length(std::vector<std::pair<double, double>>& v) {
  std::sort(v.begin(), v.end());
  double total = 0, cur_a = 0, cur_b = -1e300;
  for (const auto& [a, b] : v) {
    if (a > cur_b) {
      if (cur_b > cur_a) total += cur_b - cur_a;
      cur_a = a;
      cur_b = b;
    } else {
      cur_b = std::max(cur_b, b);
    }
  }
  if (cur_b > cur_a) total += cur_b - cur_a;
  return total;
}

// Sweep over the rank's timeline: at every instant the compute stream is busy (compute), or
// idle while communication is in flight (exposed communication, attributed to the kind of the
// earliest-started op in flight), or idle with nothing in flight: offload while a copy or host
// step runs; bubble while the rank waits on another stage (a call joining stages posted and not
// begun: [posted_us, start_us)), or outside its own span in a pipeline (fill and drain); else
// host. The five sum to the window
// (the step, for finalize) or the rank's span, whichever is longer. O(n log n) in its ops.
Breakdown rank_breakdown(const StepIR& ir, int64_t rank, const std::vector<OpTiming>& ops, double window_start_us,
                         double window_end_us) {
  const StepGraph& g = ir.graph_for(rank);
  std::vector<std::pair<double, double>> compute;
  // At equal times: ends before starts, so touching intervals leave no idle instant between.
  enum EdgeKind : int { comm_end, wait_end, compute_end, off_end, comm_start, wait_start, compute_start, off_start };
  struct Edge {
    double t;
    int kind;
    int cls;
    size_t id;
  };
  std::vector<Edge> edges;
  double first = 1e300, last = 0;
  size_t next_id = 0;
  const bool pipeline = ir.layout.pp() > 1;
  for (const OpTiming& t : ops) {
    if (t.rank != rank || t.end_us <= t.start_us) continue;
    first = std::min(first, t.start_us);
    last = std::max(last, t.end_us);
    const Op& op = g.op(t.op);
    if (op.stream == Stream::compute) {
      compute.emplace_back(t.start_us, t.end_us);
      continue;
    }
    if (off_device(op.stream)) {  // a copy or host step: exposed offload while the device idles
      edges.push_back({t.start_us, off_start, 0, 0});
      edges.push_back({t.end_us, off_end, 0, 0});
      continue;
    }
    GroupKind gk = GroupKind::tp;
    if (const auto* c = op.collective()) gk = c->group;
    else if (const auto* p = op.p2p()) gk = p->group;
    const int cls = static_cast<int>(comm_class(gk));
    edges.push_back({t.start_us, comm_start, cls, next_id});
    edges.push_back({t.end_us, comm_end, cls, next_id});
    ++next_id;
    if (pipeline && joins_pipeline_stages(gk) && t.posted_us < t.start_us) {
      first = std::min(first, t.posted_us);  // the rank's span begins at its first post
      edges.push_back({t.posted_us, wait_start, 0, 0});
      edges.push_back({t.start_us, wait_end, 0, 0});
    }
  }
  Breakdown b;
  if (first >= last) return b;
  // Fill and drain: a stage idle before its first op or after its last while the step runs.
  if (pipeline) {
    if (window_start_us < first) {
      edges.push_back({window_start_us, wait_start, 0, 0});
      edges.push_back({first, wait_end, 0, 0});
    }
    if (window_end_us > last) {
      edges.push_back({last, wait_start, 0, 0});
      edges.push_back({window_end_us, wait_end, 0, 0});
    }
  }
  first = std::min(first, window_start_us);
  last = std::max(last, window_end_us);
  b.compute_s = union_length(compute) * 1e-6;
  for (const auto& [a, e] : compute) {
    edges.push_back({a, compute_start, -1, 0});
    edges.push_back({e, compute_end, -1, 0});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& x, const Edge& y) {
    return x.t < y.t || (x.t == y.t && x.kind < y.kind);
  });
  std::set<std::pair<double, size_t>> active;  // (start, id) of comms in flight
  std::vector<std::pair<double, int>> start_cls(next_id);
  int busy = 0, waiting = 0, offloading = 0;
  double prev = first;
  for (const Edge& e : edges) {
    if (e.t > prev && busy == 0) {
      const double dt = (e.t - prev) * 1e-6;
      if (!active.empty()) b.exposed_comm_s[static_cast<size_t>(start_cls[active.begin()->second].second)] += dt;
      else if (offloading > 0) b.offload_s += dt;
      else if (waiting > 0) b.bubble_s += dt;
      else b.host_s += dt;
    }
    prev = std::max(prev, e.t);
    switch (e.kind) {
      case comm_end: active.erase({start_cls[e.id].first, e.id}); break;
      case comm_start:
        start_cls[e.id] = {e.t, e.cls};
        active.insert({e.t, e.id});
        break;
      case compute_end: --busy; break;
      case compute_start: ++busy; break;
      case wait_end: --waiting; break;
      case wait_start: ++waiting; break;
      case off_end: --offloading; break;
      case off_start: ++offloading; break;
    }
  }
  if (last > prev) b.host_s += (last - prev) * 1e-6;  // unreachable: the window's end is an edge when it extends
  return b;
}

void finalize(StepResult& r, const StepIR& ir) {
  const Scenario& s = ir.scenario;
  r.scenario = s.name;
  r.scenario_digest = scenario_digest(s);
  r.topology = s.topology.name;
  r.world_size = ir.layout.world();
  std::sort(r.ops.begin(), r.ops.end(), [](const OpTiming& a, const OpTiming& b) {
    return a.rank < b.rank || (a.rank == b.rank && a.op < b.op);
  });
  double t0 = 1e300, t1 = 0;
  for (const OpTiming& t : r.ops) {
    t0 = std::min(t0, t.start_us);
    t1 = std::max(t1, t.end_us);
  }
  r.step_time_s = r.ops.empty() ? 0 : (t1 - t0) * 1e-6;
  const StepFlops flops = step_flops(ir);
  const double gpus = static_cast<double>(r.world_size);
  if (r.step_time_s > 0) {
    r.tokens_per_s = static_cast<double>(s.tokens_per_step()) / r.step_time_s;
    r.model_tflops_per_gpu = flops.model / r.step_time_s / gpus / 1e12;
    r.hardware_tflops_per_gpu = flops.hardware / r.step_time_s / gpus / 1e12;
    const double peak = s.topology.device.peak(gemm_math(s.training.precision));
    r.mfu = peak > 0 ? r.model_tflops_per_gpu / peak : 0;
  }
  // Breakdown averaged over the ranks that ran. A communication op counts from its last
  // member's arrival: a rank's wait for a late peer (an early member of a collective, a receive
  // posted before its send) is idle time, as the simulator reports it, not communication
  // (docs/results.md, "Breakdown"). A simulated result has nothing to move (it starts a call
  // when its members have arrived), so only a measured one is aligned: on a 1,024-GPU
  // prediction the alignment would double finalize's time for nothing.
  const bool measured = r.kind == "measured";
  StepResult timed;
  if (measured) {
    timed.ops = r.ops;
    for (OpTiming& t : timed.ops) t.posted_us = t.start_us;  // as executed: each rank's own post
    align_comm_starts(timed, ir);
  }
  std::map<int64_t, std::vector<OpTiming>> by_rank;
  for (const OpTiming& t : measured ? timed.ops : r.ops) by_rank[t.rank].push_back(t);
  // Weights relative to the smallest, so that equal weights are exactly 1 (the plain mean).
  double w_min = 0;
  for (const RankStats& rs : r.ranks)
    if (rs.stands_for > 0 && (w_min == 0 || rs.stands_for < w_min)) w_min = static_cast<double>(rs.stands_for);
  if (w_min == 0) w_min = 1;
  Breakdown avg;
  double n = 0;
  for (const auto& [rank, ops] : by_rank) {
    const Breakdown b = rank_breakdown(ir, rank, ops, t0, t1);
    double w = 1;
    for (RankStats& rs : r.ranks)
      if (rs.rank == rank) {
        rs.breakdown = b;
        w = static_cast<double>(rs.stands_for) / w_min;
      }
    n += w;
    avg.compute_s += w * b.compute_s;
    avg.bubble_s += w * b.bubble_s;
    avg.host_s += w * b.host_s;
    avg.offload_s += w * b.offload_s;
    for (int c = 0; c < kCommClasses; ++c) avg.exposed_comm_s[static_cast<size_t>(c)] += w * b.exposed_comm_s[static_cast<size_t>(c)];
  }
  if (n == 0) n = 1;
  avg.compute_s /= n;
  avg.bubble_s /= n;
  avg.host_s /= n;
  avg.offload_s /= n;
  for (double& x : avg.exposed_comm_s) x /= n;
  r.breakdown = avg;
  r.bubble_fraction = r.step_time_s > 0 ? avg.bubble_s / r.step_time_s : 0;
  // Memory.
  const double capacity = s.topology.device.memory_gib * kGiB;
  double peak = 0;
  r.fits_in_memory = true;
  r.oom_rank.reset();
  for (const RankStats& rs : r.ranks) {
    peak = std::max(peak, rs.peak_memory_bytes);
    if (rs.peak_memory_bytes > capacity && (!r.oom_rank || rs.peak_time_us < r.oom_time_us)) {
      r.oom_rank = rs.rank;
      r.oom_time_us = rs.peak_time_us;
    }
  }
  r.peak_memory_gib = peak / kGiB;
  r.fits_in_memory = !r.oom_rank.has_value();
}

std::string scenario_digest(const Scenario& s) {
  // FNV-1a 64 over a canonical rendering of the keys that shape the IR.
  const auto& m = s.model;
  const auto& t = s.training;
  const auto& p = s.parallel;
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "L%lld h%lld a%lld g%lld d%lld f%lld V%lld s%lld act%d norm%d pos%d tie%d bias%d hd%.6g ad%.6g|"
                "B%lld b%lld prec%d opt%d rc%d attn%d clip%.6g|T%lld P%lld C%lld D%lld sp%d v%lld sch%d z%lld bk%.6g og%d op%d sg%d f%lld l%lld",
                (long long)m.num_layers, (long long)m.hidden_size, (long long)m.num_attention_heads,
                (long long)m.num_query_groups, (long long)m.kv_channels, (long long)m.ffn_hidden_size,
                (long long)m.vocab_size, (long long)m.seq_length, (int)m.activation, (int)m.normalization,
                (int)m.position_embedding_type, (int)m.untie_embeddings, (int)m.add_bias_linear, m.hidden_dropout,
                m.attention_dropout, (long long)t.global_batch_size, (long long)t.micro_batch_size, (int)t.precision,
                (int)t.optimizer, (int)t.recompute, (int)t.attention, t.clip_grad, (long long)p.tensor,
                (long long)p.pipeline, (long long)p.context, (long long)p.data, (int)p.sequence_parallel,
                (long long)p.virtual_pipeline_stages, (int)p.schedule, (long long)p.zero_stage, p.dp_bucket_mb,
                (int)p.overlap_grad_reduce, (int)p.overlap_param_gather, (int)p.scatter_gather_tensors_in_pipeline,
                (long long)p.decoder_first_pipeline_num_layers, (long long)p.decoder_last_pipeline_num_layers);
  std::string key = buf;
  // Keys added later join the rendering only when they differ from their defaults, so the
  // digests of scenarios that do not use them stay as they were.
  if (!t.gradient_accumulation_fusion) key += "|gaf0";
  if (t.accumulate_allreduce_grads_in_fp32) key += "|gf32";
  if (!p.async_tensor_model_parallel_allreduce) key += "|atp0";
  if (p.microbatch_group_size_per_vp_stage > 0) key += "|mbg" + std::to_string(p.microbatch_group_size_per_vp_stage);
  if (p.account_for_embedding_in_pipeline_split) key += "|aemb";
  if (p.account_for_loss_in_pipeline_split) key += "|aloss";
  if (!p.pipeline_model_parallel_layout.empty()) key += "|lay" + p.pipeline_model_parallel_layout;
  uint64_t h = 1469598103934665603ull;
  for (const char* c = key.c_str(); *c; ++c) {
    h ^= static_cast<unsigned char>(*c);
    h *= 1099511628211ull;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

}  // namespace paralab
