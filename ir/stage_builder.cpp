// paralab — one stage's step: the schedule's tasks in order, each a forward or backward pass
// of one micro-batch through one model chunk, with pipeline transfers at the chunk borders;
// then the optimizer. Receives are posted when the previous task's compute ends (as Megatron
// posts recv before each forward/backward), so buffers are not allocated early; under a split
// backward as soon as the previous receive completes (docs/simulator.md, "Zero-bubble schedules").
#include "ir/stage_builder.hpp"

#include "ir/error.hpp"

namespace paralab {

StageBuilder::StageBuilder(const Scenario& s, int64_t stage)
    : s_(s),
      stage_(stage),
      m_(ModelShape::from(s)),
      chunks_(stage_chunks(s, stage)),
      microbatches_(s.num_microbatches()),
      b_(stage),
      store_(b_, s, m_, chunks_, microbatches_) {
  if (dataparallel()) b_.launch_from_one_thread(s.parallel.data);
}

StepGraph StageBuilder::build() {
  b_.labels = OpLabels{Phase::optimizer, -1, -1, 0};
  store_.begin_step();
  const ScheduleParams sp{s_.parallel.pipeline, stage_, microbatches_, s_.parallel.virtual_pipeline_stages,
                          s_.parallel.microbatch_group_size_per_vp_stage};
  for (const PipelineTask& t : schedule_for(s_.parallel.schedule)(sp)) {
    const ChunkSpec& c = chunks_.at(static_cast<size_t>(t.chunk));
    b_.labels = OpLabels{t.forward() ? Phase::forward : Phase::backward, -1, t.microbatch, t.chunk};
    switch (t.kind) {
      case TaskKind::forward: run_forward(t, c); break;
      case TaskKind::backward: run_backward(t, c); break;
      case TaskKind::input_grad:
        defer_ = &pending_w_[{t.microbatch, t.chunk}];
        run_backward(t, c);
        defer_ = nullptr;
        break;
      case TaskKind::weight_grad: run_weight_grad(t); break;
    }
    last_task_op_ = b_.last_op(Stream::compute);
  }
  if (!pending_w_.empty()) throw InternalError("pipeline schedule left W passes unscheduled");
  b_.labels = OpLabels{Phase::optimizer, -1, -1, 0};
  store_.end_step();
  StepGraph g = b_.finish();
  g.model_params = store_.local_params();
  return g;
}

void StageBuilder::run_forward(const PipelineTask& t, const ChunkSpec& c) {
  TaskActs& ta = acts_[{t.microbatch, t.chunk}];
  // The head of a one-stage pipeline with tied embeddings reads the embedding table too.
  const bool shared_table = c.embedding && c.head && store_.head_unit() >= 0 &&
                            !store_.has(store_.head_unit(), ParamRole::out_w);
  OpId prev_first = last_task_op_;
  auto unit_start = [&](int unit) {
    store_.gather(unit, prev_first);
    prev_first = static_cast<OpId>(b_.size());  // the unit's first op is the next one added
  };
  BufferId x;
  if (c.embedding) {
    b_.labels.layer = -1;
    unit_start(store_.embedding_unit());
    ta.emb = embedding_forward();
    if (!shared_table) store_.release_gathered(store_.embedding_unit());
    x = ta.emb.out;
  } else {
    x = receive(t, c, true);
  }
  for (int64_t l = c.first_layer; l < c.first_layer + c.num_layers; ++l) {
    b_.labels.layer = static_cast<int32_t>(l);
    const int u = store_.layer_unit(l);
    unit_start(u);
    ta.layers.push_back(layer_forward(l, x, s_.training.recompute, false));
    store_.release_gathered(u);
    x = ta.layers.back().out;
  }
  if (c.head) {
    b_.labels.layer = static_cast<int32_t>(m_.layers);
    unit_start(store_.head_unit());
    ta.head = head_forward(x);
    store_.release_gathered(store_.head_unit());
    if (shared_table) store_.release_gathered(store_.embedding_unit());
  } else {
    send(t, c, x, true);
  }
}

void StageBuilder::run_backward(const PipelineTask& t, const ChunkSpec& c) {
  TaskActs& ta = acts_.at({t.microbatch, t.chunk});
  const bool shared_table = c.embedding && c.head && !store_.has(store_.head_unit(), ParamRole::out_w);
  OpId prev_first = last_task_op_;
  auto unit_start = [&](int unit) {
    store_.gather(unit, prev_first);
    prev_first = static_cast<OpId>(b_.size());
  };
  BufferId dy;
  if (c.head) {
    b_.labels.layer = static_cast<int32_t>(m_.layers);
    if (shared_table) unit_start(store_.embedding_unit());
    unit_start(store_.head_unit());
    dy = head_backward(ta.head);
    store_.release_gathered(store_.head_unit());
  } else {
    dy = receive(t, c, false);
  }
  for (int64_t i = static_cast<int64_t>(ta.layers.size()) - 1; i >= 0; --i) {
    const int64_t l = c.first_layer + i;
    b_.labels.layer = static_cast<int32_t>(l);
    const int u = store_.layer_unit(l);
    unit_start(u);
    LayerActs& a = ta.layers[static_cast<size_t>(i)];
    if (s_.training.recompute == Recompute::full) {
      // Full recomputation: rerun the layer's forward (its collectives included) from the
      // saved input, then run the backward on the recomputed activations.
      b_.labels.phase = Phase::recompute;
      LayerActs r = layer_forward(l, a.x, Recompute::full, true);
      b_.release(r.out);
      r.out = kNoBuffer;
      a = r;
      b_.labels.phase = Phase::backward;
    }
    layer_backward(l, a, dy);
    store_.release_gathered(u);
  }
  if (c.embedding) {
    b_.labels.layer = -1;
    if (!shared_table) unit_start(store_.embedding_unit());
    embedding_backward(ta.emb, dy);
    store_.release_gathered(store_.embedding_unit());
    b_.release(dy);
  } else {
    send(t, c, dy, false);
  }
  acts_.erase({t.microbatch, t.chunk});
}

// W: the weight-gradient GEMMs the task's B deferred, in B's order (Megatron's
// delay_wgrad_compute); each releases the buffers B held for it.
void StageBuilder::run_weight_grad(const PipelineTask& t) {
  const auto it = pending_w_.find({t.microbatch, t.chunk});
  if (it == pending_w_.end()) throw InternalError("pipeline schedule runs W before its B");
  for (const auto& emit : it->second) emit();
  pending_w_.erase(it);
}

void StageBuilder::weight_grad(std::vector<BufferId> reads, std::function<OpId()> emit) {
  if (!defer_) {
    emit();
    return;
  }
  for (BufferId r : reads) b_.hold(r);
  OpLabels labels = b_.labels;
  labels.phase = Phase::weight_grad;
  defer_->push_back([this, reads = std::move(reads), labels, emit = std::move(emit)] {
    b_.labels = labels;
    emit();
    for (BufferId r : reads) b_.unhold(r);
  });
}

namespace {
// The same tag on both sides of a transfer: direction, micro-batch, receiving virtual stage.
uint32_t p2p_tag(int32_t mb, int64_t receiver_vs, int64_t virtual_stages, bool activation) {
  return kTagP2PBase + static_cast<uint32_t>(2 * (mb * virtual_stages + receiver_vs) + (activation ? 0 : 1));
}
}  // namespace

// Megatron's scatter/gather of pipeline transfers (Narayanan et al. 2021, Sec. 4.1): each tensor
// rank sends 1/t of the activation and the receivers all-gather it; without sequence
// parallelism only, and only where the [tokens, hidden] rows split evenly over t (e.g. not
// 2048 tokens over t = 3): otherwise the whole tensor is sent, as without the option.
bool StageBuilder::pipeline_scatter_gather() const {
  return s_.parallel.scatter_gather_tensors_in_pipeline && !m_.sp && m_.tp > 1 && m_.tokens() % m_.tp == 0;
}

BufferId StageBuilder::receive(const PipelineTask& t, const ChunkSpec& c, bool activation) {
  const int64_t h = m_.hidden, Tsp = m_.tokens_sp();
  const bool sg = pipeline_scatter_gather();
  const int64_t rows = sg ? m_.tokens() / m_.tp : Tsp;
  const BufferId in = act_buffer(activation ? "recv_activation" : "recv_grad", rows, h, m_.act,
                                 sg ? MemCategory::buffers : MemCategory::activations);
  OpSpec o;
  o.kind = OpKind::recv;
  o.stream = activation ? Stream::pp_recv : Stream::pp_recv_grad;
  o.name = activation ? "recv_forward" : "recv_backward";
  o.writes = {b_.view(in, {rows, h})};
  const int64_t bytes = rows * h * bytes_of(m_.act);
  const int64_t vs_total = m_.pp * s_.parallel.virtual_pipeline_stages;
  o.attrs = P2PAttrs{GroupKind::pp, 0, activation ? -1 : 1, bytes,
                     p2p_tag(t.microbatch, c.virtual_stage, vs_total, activation), sg ? static_cast<int32_t>(m_.tp) : 1};
  o.bytes = static_cast<double>(bytes);
  // Split backwards (B and W tasks) receive unthrottled: a receive waiting for the previous
  // task's compute would hold a neighbour's input-gradient send, which its B is waiting to pass.
  if (last_task_op_ != kNoOp && !schedule_info(s_.parallel.schedule).splits_backward)
    o.extra_deps.push_back(last_task_op_);
  b_.add(std::move(o));
  if (!sg) return in;
  const BufferId full = tp_all_gather(activation ? "recv_activation_all_gather" : "recv_grad_all_gather", in,
                                      MemCategory::activations);
  b_.release(in);
  return full;
}

void StageBuilder::send(const PipelineTask& t, const ChunkSpec& c, BufferId what, bool activation) {
  const int64_t h = m_.hidden;
  const bool sg = pipeline_scatter_gather();
  const int64_t rows = sg ? m_.tokens() / m_.tp : m_.tokens_sp();
  OpSpec o;
  o.kind = OpKind::send;
  o.stream = activation ? Stream::pp_send : Stream::pp_send_grad;
  o.name = activation ? "send_forward" : "send_backward";
  o.reads = {b_.view(what, {rows, h})};
  const int64_t bytes = rows * h * bytes_of(m_.act);
  const int64_t vs_total = m_.pp * s_.parallel.virtual_pipeline_stages;
  const int64_t receiver = c.virtual_stage + (activation ? 1 : -1);
  o.attrs = P2PAttrs{GroupKind::pp, activation ? 1 : -1, 0, bytes,
                     p2p_tag(t.microbatch, receiver, vs_total, activation), sg ? static_cast<int32_t>(m_.tp) : 1};
  o.bytes = static_cast<double>(bytes);
  b_.add(std::move(o));
  b_.release(what);
}

}  // namespace paralab
