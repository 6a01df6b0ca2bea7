// paralab — closed-form peak memory per device.
#include "plan/memory_estimate.hpp"

#include <algorithm>

#include "ir/model_shape.hpp"
#include "ir/partition.hpp"
#include "ir/schedule.hpp"

namespace paralab {

namespace {

// Bytes one layer keeps for its backward pass, per micro-batch (the IR's LayerActs).
double layer_saved(const ModelShape& m, Recompute rc, AttentionImpl attn) {
  const double e = static_cast<double>(bytes_of(m.act));
  const double T = static_cast<double>(m.tokens()), Tsp = static_cast<double>(m.tokens_sp());
  const double h = static_cast<double>(m.hidden);
  const double out = Tsp * h * e;
  if (rc == Recompute::full) return out;
  const double stats = Tsp * 2 * 4;
  const double mask = m.hidden_dropout > 0 ? Tsp * h : 0;
  const double bh = static_cast<double>(m.micro_batch * m.heads_local()), s = static_cast<double>(m.seq_local());
  double core = 0;
  if (attn == AttentionImpl::flash) core = bh * s * 4;  // log-sum-exp
  else if (rc == Recompute::none) core = bh * s * s * (e + (m.attention_dropout > 0 ? 1 + e : 0));
  return Tsp * h * e + stats + T * static_cast<double>(m.qkv_cols()) * e + core +
         T * static_cast<double>(m.attn_cols()) * e + mask + Tsp * h * e + Tsp * h * e + stats +
         T * static_cast<double>(m.fc1_cols()) * e + T * static_cast<double>(m.ffn_local()) * e + mask + out;
}

// Chunk-micro-batches a stage holds activations for at once, counted on the schedule's own
// task list (a forward's activations live until its W or whole backward).
double in_flight(const Scenario& s, int64_t stage) {
  const ScheduleParams sp{s.parallel.pipeline, stage, s.num_microbatches(), s.parallel.virtual_pipeline_stages,
                          s.parallel.microbatch_group_size_per_vp_stage};
  return static_cast<double>(peak_in_flight(schedule_for(s.parallel.schedule)(sp)));
}

double params_of(const std::vector<ParamSpec>& ps) {
  double n = 0;
  for (const auto& p : ps) n += static_cast<double>(p.elements());
  return n;
}

}  // namespace

MemoryEstimate estimate_memory(const Scenario& s) {
  const ModelShape m = ModelShape::from(s);
  const double e = static_cast<double>(bytes_of(m.act));
  const double n = static_cast<double>(s.parallel.data * s.parallel.context);
  const int64_t zero = n > 1 ? s.parallel.zero_stage : 0;
  const double K = (is_mixed(s.training.precision) ? 4.0 : 0.0) + (s.training.optimizer == Optimizer::adam ? 8.0 : 4.0);
  const double T = static_cast<double>(m.tokens()), Tsp = static_cast<double>(m.tokens_sp());
  const double h = static_cast<double>(m.hidden), V = static_cast<double>(m.vocab_local());
  const double layer_params = params_of(m.layer_params());
  const double per_layer = layer_saved(m, s.training.recompute, s.training.attention);
  const double full_layer = layer_saved(m, Recompute::none, s.training.attention);

  MemoryEstimate best;
  for (int64_t stage = 0; stage < s.parallel.pipeline; ++stage) {
    const auto chunks = stage_chunks(s, stage);
    double params = 0, layers = 0;
    bool emb = false, head = false;
    for (const auto& c : chunks) {
      layers += static_cast<double>(c.num_layers);
      emb |= c.embedding;
      head |= c.head;
    }
    params += layers * layer_params;
    if (emb) params += params_of(m.embedding_params());
    if (head) params += params_of(m.head_params(!m.tied || m.pp > 1));
    const double resident = params * e / (zero >= 3 ? n : 1) + params * e / (zero >= 2 ? n : 1) + params * K / (zero >= 1 ? n : 1);

    const double flight = in_flight(s, stage);
    const double chunks_n = static_cast<double>(chunks.size());
    double acts = flight * (layers / chunks_n) * per_layer;
    const double per_chunk_flight = std::max(1.0, flight / chunks_n);
    if (emb) acts += per_chunk_flight * (T * 4 + (m.hidden_dropout > 0 ? Tsp * h : 0));
    if (head) acts += per_chunk_flight * (Tsp * h * e + Tsp * 8 + T * 4 + T * V * 4 + T * 8 + T * 4);

    // Largest transient working set: a layer's backward (with a recomputed layer under full
    // recomputation), the output layer's logits and their gradient, unfused attention scores,
    // ZeRO-3's gathered parameters (current + prefetched) and full per-layer gradients.
    const double gathers = m.sp ? T * h * e : 0;
    double layer_bwd = T * static_cast<double>(m.fc1_cols()) * e + T * static_cast<double>(m.ffn_local()) * e + 2 * T * h * e + gathers;
    if (s.training.recompute == Recompute::full) layer_bwd += full_layer;
    double transient = layer_bwd;
    if (head) transient = std::max(transient, 2 * T * V * e + T * h * e);
    if (s.training.attention == AttentionImpl::unfused) {
      const double bh = static_cast<double>(m.micro_batch * m.heads_local()), sl = static_cast<double>(m.seq_local());
      transient = std::max(transient, 2 * bh * sl * sl * e + T * h * e);
    }
    if (zero >= 3) transient += 3 * layer_params * e;
    else if (zero >= 2) transient += std::min(params * e, s.parallel.bucket_bytes(bytes_of(m.act))) * 2;
    const double peak = resident + acts + transient;
    if (peak > best.peak_bytes) best = MemoryEstimate{peak, stage, resident, acts, transient};
  }
  return best;
}

}  // namespace paralab
