// paralab — the planner's admissible lower bound on a step (lower_bound.hpp).
#include "plan/lower_bound.hpp"

#include <algorithm>

#include "ir/error.hpp"
#include "ir/partition.hpp"
#include "ir/schedule.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/step_ir.hpp"
#include "sim/compute/compute_model.hpp"
#include "sim/engine/overhead.hpp"
#include "sim/simulate.hpp"

namespace paralab {

namespace {

// The probe's per-layer spans on its compute stream, from its simulation: the forward from the
// first op of layer 0 to the first op of the head, the backward (with recomputation) from its
// first op of layer 0 to the first op of the embedding's backward. They hold the tensor- and
// context-parallel calls the layer waits for, as every layer of the layout does (0 when a
// marker is missing).
void add_spans(const StepIR& ir, const StepGraph& g, LayerCosts& c) {
  const sim::Simulation run = sim::simulate(ir, sim::SimulateOptions{});
  const int64_t rank = ir.layout.representative(0);
  std::vector<double> start(g.ops.size(), -1.0);
  for (const OpTiming& t : run.result.ops)
    if (t.rank == rank && t.op < start.size()) start[t.op] = t.start_us;
  double f0 = -1, head = -1, b0 = -1, emb = -1;
  for (OpId id : g.streams[static_cast<size_t>(Stream::compute)]) {
    const Op& op = g.ops[id];
    const bool fwd = op.phase == Phase::forward;
    const bool bwd = op.phase == Phase::backward || op.phase == Phase::recompute || op.phase == Phase::weight_grad;
    if (fwd && op.layer == 0 && f0 < 0) f0 = start[id];
    if (fwd && op.layer > 0 && f0 >= 0 && head < 0) head = start[id];
    if (bwd && op.layer == 0 && b0 < 0) b0 = start[id];
    if (bwd && op.layer < 0 && b0 >= 0 && emb < 0) emb = start[id];
  }
  if (f0 >= 0 && head >= f0) c.layer_fwd_us = std::max(c.layer_fwd_us, head - f0);
  if (b0 >= 0 && emb >= b0) c.layer_bwd_us = std::max(c.layer_bwd_us, emb - b0);
}

}  // namespace

Scenario one_stage_probe(const Scenario& s, int64_t layers, int64_t microbatches, int64_t data) {
  Scenario p = s;
  p.model.num_layers = layers;
  p.parallel.pipeline = 1;
  p.parallel.virtual_pipeline_stages = 1;
  p.parallel.schedule = Schedule::one_f_one_b;
  p.parallel.decoder_first_pipeline_num_layers = p.parallel.decoder_last_pipeline_num_layers = 0;
  p.parallel.account_for_embedding_in_pipeline_split = p.parallel.account_for_loss_in_pipeline_split = false;
  p.parallel.pipeline_model_parallel_layout.clear();
  p.parallel.pipeline_layout.clear();
  p.parallel.data = data;
  p.training.global_batch_size = microbatches * p.training.micro_batch_size * data;
  return p;
}

LayerCosts probe_layer_costs(const Scenario& s) {
  Scenario p = one_stage_probe(s, 1, 1, 1);
  p.parallel.zero_stage = 0;
  const int64_t ranks = p.parallel.tensor * p.parallel.context;
  p.cluster.devices_per_node = std::min<int64_t>(ranks, std::max<int64_t>(1, p.topology.node.devices_per_node));
  p.cluster.nodes = (ranks + p.cluster.devices_per_node - 1) / p.cluster.devices_per_node;
  validate_scenario(p);
  const StepIR ir = build_step_ir(p);
  const StepGraph& g = ir.stages.at(0);
  const sim::ComputeModel model(p.topology);
  std::vector<double> dur = model.durations(g);
  const std::vector<sim::OpOverhead> over = sim::stage_overheads(ir, g, ir.layout.representative(0));
  LayerCosts c;
  for (const Op& op : g.ops) {
    if (is_comm(op.kind) || op.stream != Stream::compute) continue;
    double t = dur[op.id];
    if (!over.empty()) t = std::max(0.0, over[op.id].time.apply(t));
    const bool fwd = op.phase == Phase::forward;
    const bool bwd = op.phase == Phase::backward || op.phase == Phase::recompute || op.phase == Phase::weight_grad;
    if (!fwd && !bwd) continue;  // the optimizer: left out
    double* slot = nullptr;
    if (op.layer == 0) slot = fwd ? &c.layer_fwd_us : &c.layer_bwd_us;
    else if (op.layer < 0) slot = fwd ? &c.embedding_fwd_us : &c.embedding_bwd_us;
    else slot = fwd ? &c.head_fwd_us : &c.head_bwd_us;
    *slot += t;
  }
  add_spans(ir, g, c);
  return c;
}

namespace {

// `cache`'s value for `key`, made by `probe` outside the lock (probes run in parallel).
template <class Map, class Probe>
typename Map::mapped_type cached(std::mutex& mu, Map& cache, const typename Map::key_type& key, Probe probe) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  const typename Map::mapped_type v = probe();
  std::lock_guard<std::mutex> lock(mu);
  return cache.emplace(key, v).first->second;
}

}  // namespace

LayerCosts LowerBound::costs(const Scenario& s) {
  const Key k{s.parallel.tensor, s.parallel.context, s.training.micro_batch_size, s.parallel.sequence_parallel,
              static_cast<int>(s.training.recompute)};
  return cached(mu_, cache_, k, [&] { return probe_layer_costs(s); });
}

DpCosts LowerBound::dp_costs(const Scenario& s) {
  const DpKey k{s.parallel.tensor, s.parallel.context, s.parallel.data, s.parallel.zero_stage};
  return cached(mu_, dp_cache_, k, [&] { return probe_dp_costs(s); });
}

size_t LowerBound::probes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size() + dp_cache_.size();
}

double LowerBound::step_s(const Scenario& s) {
  LayerCosts c;
  DpCosts d;
  try {
    c = costs(s);
    d = dp_costs(s);
  } catch (const ConfigError&) {
    return 0.0;  // no probe: never pruned
  }
  const int64_t p = s.parallel.pipeline, m = s.num_microbatches();
  // Forward and backward time of each virtual stage for one micro-batch, in pipeline order.
  std::vector<double> vf, vb;
  std::vector<double> stage_work(static_cast<size_t>(p), 0.0);
  for (int64_t st = 0; st < p; ++st)
    for (const ChunkSpec& ch : stage_chunks(s, st)) {
      const double L = static_cast<double>(ch.num_layers);
      double f = L * c.layer_fwd_us, b = L * c.layer_bwd_us;
      if (ch.embedding) {
        f += c.embedding_fwd_us;
        b += c.embedding_bwd_us;
      }
      if (ch.head) {
        f += c.head_fwd_us;
        b += c.head_bwd_us;
      }
      const auto vs = static_cast<size_t>(ch.virtual_stage);
      if (vf.size() <= vs) {
        vf.resize(vs + 1, 0.0);
        vb.resize(vs + 1, 0.0);
      }
      vf[vs] = f;
      vb[vs] = b;
      stage_work[static_cast<size_t>(st)] += f + b;
    }
  double bound_us = 0, before_f = 0, before_b = 0, stage0_layers = 0;
  for (const ChunkSpec& ch : stage_chunks(s, 0)) stage0_layers += static_cast<double>(ch.num_layers);
  const double data_us = (1 - 1e-3) * stage0_layers * (d.layer_us + static_cast<double>(m) * d.layer_mb_us);
  // Under a split backward a stage may end on weight gradients that run while the stages before
  // it do their last input gradients: only the forward chain before it is certain.
  const bool tail = !schedule_info(s.parallel.schedule).splits_backward;
  for (int64_t st = 0; st < p; ++st) {
    // Virtual stages 0 .. st - 1 are the first chunk of the stages before st.
    const double lb = before_f + static_cast<double>(m) * stage_work[static_cast<size_t>(st)] + (tail ? before_b : 0.0);
    bound_us = std::max(bound_us, lb);
    before_f += vf[static_cast<size_t>(st)];
    before_b += vb[static_cast<size_t>(st)];
  }
  return std::max(bound_us, data_us) * 1e-6;
}

}  // namespace paralab
