// paralab — parameter/gradient/optimizer buffers and the data-parallel gradient strategy.
#include "ir/param_store.hpp"

#include <algorithm>
#include <string>

#include "ir/error.hpp"

namespace paralab {

namespace {
std::string unit_name(int32_t layer, int64_t num_layers) {
  if (layer < 0) return "emb";
  if (layer >= num_layers) return "head";
  return "L" + std::to_string(layer);
}
}  // namespace

ParamStore::ParamStore(GraphBuilder& b, const Scenario& s, const ModelShape& m,
                       const std::vector<ChunkSpec>& chunks, int64_t microbatches)
    : b_(b), s_(s), m_(m), microbatches_(microbatches) {
  dp_size_ = s.parallel.data * s.parallel.context;
  const int64_t zero = s.parallel.zero_stage;
  // Sharding over a group of one is no sharding: keep the unsharded code path.
  shard_opt_ = zero >= 1 && dp_size_ > 1;
  shard_grads_ = zero >= 2 && dp_size_ > 1;
  shard_weights_ = zero >= 3 && dp_size_ > 1;
  offload_opt_ = s.training.optimizer_cpu_offload;
  offload_params_ = shard_weights_ && s.parallel.offload_param == OffloadParam::cpu;
  dataparallel_ = s.parallel.data_parallel_impl == DataParallelImpl::dataparallel && dp_size_ > 1;
  // Megatron's --accumulate-allreduce-grads-in-fp32: fp32 gradient buffers under mixed precision.
  grad_dtype_ = s.training.accumulate_allreduce_grads_in_fp32 ? DType::f32 : m.act;
  layer_units_.assign(static_cast<size_t>(m.layers), -1);

  auto add_unit = [&](int32_t layer, int16_t chunk, const std::vector<ParamSpec>& params) {
    Unit u;
    u.layer = layer;
    u.chunk = chunk;
    u.slot.fill(-1);
    const int id = static_cast<int>(units_.size());
    for (const auto& p : params) {
      u.slot[static_cast<size_t>(p.role)] = static_cast<int>(slots_.size());
      slots_.push_back({p, id, 0, 0});
    }
    units_.push_back(u);
    return id;
  };
  // Forward order; buckets are laid out in reverse (backward) order like Megatron's grad buffer.
  for (const auto& c : chunks) {
    if (c.embedding) embedding_unit_ = add_unit(-1, c.chunk, m.embedding_params());
    for (int64_t l = c.first_layer; l < c.first_layer + c.num_layers; ++l)
      layer_units_[static_cast<size_t>(l)] = add_unit(static_cast<int32_t>(l), c.chunk, m.layer_params());
    // The output layer is the first stage's table when tied and the pipeline has one stage.
    if (c.head) head_unit_ = add_unit(static_cast<int32_t>(m.layers), c.chunk, m.head_params(!m.tied || m.pp > 1));
  }
  layout_buckets();
  create_buffers();
}

int ParamStore::layer_unit(int64_t layer) const {
  const int u = layer_units_.at(static_cast<size_t>(layer));
  if (u < 0) throw InternalError("ParamStore: layer " + std::to_string(layer) + " is not on this stage");
  return u;
}

bool ParamStore::has(int unit, ParamRole r) const {
  return unit >= 0 && units_[static_cast<size_t>(unit)].slot[static_cast<size_t>(r)] >= 0;
}

// Buckets: ZeRO-3 gathers whole units (FSDP wraps each transformer layer); otherwise params are
// packed in backward order until a bucket holds dp_bucket_mb of gradients. Embedding tables
// (tied across the first and last stage) get their own bucket so both stages shard them alike.
void ParamStore::layout_buckets() {
  const double cap_bytes = s_.parallel.bucket_bytes(bytes_of(grad_dtype_));
  auto is_table = [](ParamRole r) { return r == ParamRole::word_emb || r == ParamRole::out_w; };
  int current = -1;
  int16_t current_chunk = -1;
  int current_unit = -1;
  auto open_bucket = [&](int16_t chunk) {
    buckets_.push_back(Bucket{});
    buckets_.back().chunk = chunk;
    current = static_cast<int>(buckets_.size()) - 1;
    current_chunk = chunk;
  };
  for (int si = static_cast<int>(slots_.size()) - 1; si >= 0; --si) {
    Slot& sl = slots_[static_cast<size_t>(si)];
    const Unit& u = units_[static_cast<size_t>(sl.unit)];
    const bool table = is_table(sl.spec.role);
    bool need_new = current < 0 || u.chunk != current_chunk || table;
    if (!need_new && shard_weights_) need_new = sl.unit != current_unit;
    if (!need_new && !shard_weights_) {
      const Bucket& bk = buckets_[static_cast<size_t>(current)];
      const bool prev_table = !bk.slots.empty() && is_table(slots_[static_cast<size_t>(bk.slots.back())].spec.role);
      need_new = prev_table || static_cast<double>(bk.used * bytes_of(grad_dtype_)) >= cap_bytes;
    }
    if (need_new) open_bucket(u.chunk);
    Bucket& bk = buckets_[static_cast<size_t>(current)];
    sl.bucket = current;
    sl.offset = bk.used;
    bk.used += sl.spec.elements();
    bk.slots.push_back(si);
    current_unit = sl.unit;
  }
  for (auto& bk : buckets_) {
    // Pad to a multiple of the group so shards are equal (Megatron pads its buckets too).
    bk.elements = (bk.used + dp_size_ - 1) / dp_size_ * dp_size_;
    bk.shard = bk.elements / dp_size_;
    bk.remaining = static_cast<int>(bk.slots.size());
  }
  for (size_t bi = 0; bi < buckets_.size(); ++bi)
    for (int si : buckets_[bi].slots) {
      auto& ub = units_[static_cast<size_t>(slots_[static_cast<size_t>(si)].unit)].buckets;
      if (std::find(ub.begin(), ub.end(), static_cast<int>(bi)) == ub.end()) ub.push_back(static_cast<int>(bi));
    }
}

void ParamStore::create_buffers() {
  const Precision prec = s_.training.precision;
  const bool mixed = is_mixed(prec);
  const bool adam = s_.training.optimizer == Optimizer::adam;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& bk = buckets_[i];
    const Slot& first = slots_[static_cast<size_t>(bk.slots.front())];
    const Slot& last = slots_[static_cast<size_t>(bk.slots.back())];
    const std::string name = "c" + std::to_string(bk.chunk) + ".bucket" + std::to_string(i) + "[" +
                             unit_name(units_[static_cast<size_t>(last.unit)].layer, m_.layers) + ".." +
                             unit_name(units_[static_cast<size_t>(first.unit)].layer, m_.layers) + "]";
    int64_t params = 0;
    for (int si : bk.slots) params += slots_[static_cast<size_t>(si)].spec.elements();
    local_params_ += params;
    const int64_t w_elems = shard_weights_ ? bk.shard : bk.elements;
    const int64_t w_params = shard_weights_ ? params / dp_size_ : params;
    // ZeRO-3 with offload_param: the weight shard lives on the host, staged in per gather.
    bk.weights = offload_params_ ? b_.host_buffer(name + ".weights", w_elems, m_.act, MemCategory::weights, w_params)
                                 : b_.buffer(name + ".weights", w_elems, m_.act, MemCategory::weights, true, w_params);
    bk.grads = b_.buffer(name + ".grads", shard_grads_ ? bk.shard : bk.elements, grad_dtype_,
                         MemCategory::grads, true);
    create_optimizer_buffers(bk, name, shard_opt_ ? bk.shard : bk.elements, mixed, adam);
  }
}

TensorRef ParamStore::weight(int unit, ParamRole r) {
  const Unit& u = units_.at(static_cast<size_t>(unit));
  const int si = u.slot[static_cast<size_t>(r)];
  if (si < 0) throw InternalError("ParamStore::weight: no such parameter");
  const Slot& sl = slots_[static_cast<size_t>(si)];
  const Bucket& bk = buckets_[static_cast<size_t>(sl.bucket)];
  if (shard_weights_) {
    if (!bk.gathered_live) throw InternalError("ParamStore::weight: ZeRO-3 parameters used before they were gathered");
    return b_.view(bk.gathered, {sl.spec.rows, sl.spec.cols}, sl.offset);
  }
  return b_.view(bk.weights, {sl.spec.rows, sl.spec.cols}, sl.offset);
}

TensorRef ParamStore::grad(int unit, ParamRole r) {
  const Unit& u = units_.at(static_cast<size_t>(unit));
  const int si = u.slot[static_cast<size_t>(r)];
  if (si < 0) throw InternalError("ParamStore::grad: no such parameter");
  const Slot& sl = slots_[static_cast<size_t>(si)];
  Bucket& bk = buckets_[static_cast<size_t>(sl.bucket)];
  if (!shard_grads_) return b_.view(bk.grads, {sl.spec.rows, sl.spec.cols}, sl.offset);
  if (!bk.transient_live) {
    bk.transient = b_.buffer(b_.buf(bk.grads).name + ".mb" + std::to_string(b_.labels.microbatch) + ".full",
                             bk.elements, grad_dtype_, MemCategory::buffers);
    bk.transient_live = true;
  }
  return b_.view(bk.transient, {sl.spec.rows, sl.spec.cols}, sl.offset);
}

void ParamStore::grad_done(int unit, ParamRole r) {
  const int si = units_.at(static_cast<size_t>(unit)).slot[static_cast<size_t>(r)];
  Bucket& bk = buckets_[static_cast<size_t>(slots_[static_cast<size_t>(si)].bucket)];
  if (--bk.remaining > 0) return;
  bk.remaining = static_cast<int>(bk.slots.size());
  // Counted in rounds, not by the caller's micro-batch: with W deferred (zero-bubble
  // schedules) a later micro-batch's B can complete a slot before an earlier one's W.
  const bool final_round = ++bk.cycles == microbatches_;
  // nn.DataParallel reduces after the whole backward (the replicas' Broadcast backward).
  if (shard_grads_ || (final_round && s_.parallel.overlap_grad_reduce && !dataparallel_))
    reduce(static_cast<int>(&bk - buckets_.data()));
}

OpId ParamStore::collective(const char* name, CollKind kind, GroupKind group, ReduceOp op,
                            std::vector<TensorRef> reads, std::vector<TensorRef> writes, int64_t bytes,
                            uint32_t tag) {
  OpSpec spec;
  spec.kind = OpKind::collective;
  spec.stream = Stream::dp_comm;
  spec.name = name;
  spec.reads = std::move(reads);
  spec.writes = std::move(writes);
  spec.attrs = CollectiveAttrs{kind, group, op, bytes, tag == 0 ? b_.next_tag() : tag};
  spec.bytes = static_cast<double>(bytes);
  return b_.add(std::move(spec));
}

TensorRef ParamStore::grad_target(const Bucket& bk) const {
  if (shard_grads_) return b_.whole(bk.grads);
  if (shard_opt_) return b_.view(bk.grads, {bk.shard}, 0);  // this rank's shard (rank 0's offset)
  return b_.whole(bk.grads);
}

TensorRef ParamStore::weight_target(const Bucket& bk) const {
  if (shard_weights_) return b_.whole(bk.weights);
  if (shard_opt_) return b_.view(bk.weights, {bk.shard}, 0);
  return b_.whole(bk.weights);
}

// One bucket's gradient reduction over the data-parallel (x context-parallel) group.
void ParamStore::reduce(int bi) {
  Bucket& bk = buckets_[static_cast<size_t>(bi)];
  const int64_t full_bytes = bk.elements * bytes_of(grad_dtype_);
  if (shard_grads_) {
    // ZeRO-2/3: every micro-batch, reduce-scatter the full gradient into the resident shard.
    collective("grad_reduce_scatter", CollKind::reduce_scatter, GroupKind::dp, ReduceOp::sum,
               {b_.whole(bk.transient), b_.whole(bk.grads)}, {b_.whole(bk.grads)}, full_bytes, 0);
    b_.release(bk.transient);
    bk.transient_live = false;
    return;
  }
  if (dp_size_ == 1 || bk.reduced) return;
  bk.reduced = true;
  if (shard_opt_)  // ZeRO-1 (Megatron's distributed optimizer): reduce-scatter in place
    collective("grad_reduce_scatter", CollKind::reduce_scatter, GroupKind::dp, ReduceOp::sum,
               {b_.whole(bk.grads)}, {b_.whole(bk.grads)}, full_bytes, 0);
  else if (dataparallel_)  // nn.DataParallel: the replicas' gradients summed onto device 0
    collective("grad_reduce", CollKind::reduce, GroupKind::dp, ReduceOp::sum, {b_.whole(bk.grads)},
               {b_.whole(bk.grads)}, full_bytes, 0);
  else  // DDP
    collective("grad_all_reduce", CollKind::all_reduce, GroupKind::dp, ReduceOp::sum,
               {b_.whole(bk.grads)}, {b_.whole(bk.grads)}, full_bytes, 0);
}

void ParamStore::gather(int unit, OpId after) {
  if (!shard_weights_ || unit < 0) return;
  for (int bi : units_[static_cast<size_t>(unit)].buckets) {
    Bucket& bk = buckets_[static_cast<size_t>(bi)];
    if (bk.gathered_live) continue;
    bk.gathered = b_.buffer(b_.buf(bk.weights).name + ".gathered", bk.elements, m_.act, MemCategory::buffers);
    bk.gathered_live = true;
    TensorRef shard = b_.whole(bk.weights);
    BufferId staged = 0;
    if (offload_params_) {  // host shard -> device, then gathered (ZeRO-Infinity's parameter path)
      staged = b_.buffer(b_.buf(bk.weights).name + ".staged", bk.shard, m_.act, MemCategory::buffers);
      const OpId c = copy("param_h2d", Stream::h2d, shard, b_.whole(staged));
      if (after != kNoOp && after < c) b_.depend(c, after);
      shard = b_.whole(staged);
    }
    const OpId id = collective("param_all_gather", CollKind::all_gather, GroupKind::dp, ReduceOp::sum,
                               {shard}, {b_.whole(bk.gathered)}, bk.elements * bytes_of(m_.act), 0);
    if (after != kNoOp && after < id) b_.depend(id, after);
    if (offload_params_) b_.release(staged);
  }
}

void ParamStore::release_gathered(int unit) {
  if (!shard_weights_ || unit < 0) return;
  for (int bi : units_[static_cast<size_t>(unit)].buckets) {
    Bucket& bk = buckets_[static_cast<size_t>(bi)];
    if (!bk.gathered_live) continue;
    b_.release(bk.gathered);
    bk.gathered_live = false;
  }
}

// ZeRO-1/2: after the sharded optimizer step every rank all-gathers the updated parameters.
void ParamStore::all_gather_weights(int bi) {
  const Bucket& bk = buckets_[static_cast<size_t>(bi)];
  if (!shard_opt_ || shard_weights_) return;
  collective("param_all_gather", CollKind::all_gather, GroupKind::dp, ReduceOp::sum,
             {b_.view(bk.weights, {bk.shard}, 0)}, {b_.whole(bk.weights)}, bk.elements * bytes_of(m_.act), 0);
}

// Megatron's overlap_param_gather issues the gathers of step k+1 during its forward pass;
// in a steady-state step that is the start of this step, first bucket needed first.
void ParamStore::begin_step() {
  // nn.DataParallel replicates the module from device 0 at every forward: a broadcast of every
  // parameter (torch.nn.parallel.replicate, comm.broadcast_coalesced), first bucket first.
  if (dataparallel_)
    for (int bi = static_cast<int>(buckets_.size()) - 1; bi >= 0; --bi) {
      const Bucket& bk = buckets_[static_cast<size_t>(bi)];
      collective("param_broadcast", CollKind::broadcast, GroupKind::dp, ReduceOp::sum, {b_.whole(bk.weights)},
                 {b_.whole(bk.weights)}, b_.buf(bk.weights).bytes(), 0);
    }
  if (!s_.parallel.overlap_param_gather) return;
  for (int bi = static_cast<int>(buckets_.size()) - 1; bi >= 0; --bi) all_gather_weights(bi);
}

// Sequence parallelism leaves each TP rank with the gradient of its own sequence shard for
// the replicated parameters (norms, row-parallel biases): Megatron all-reduces them over the
// tensor-parallel group before the optimizer (finalize_model_grads).
void ParamStore::emit_replicated_grad_reduce() {
  if (!m_.sp || shard_grads_) return;
  std::vector<TensorRef> views;
  int64_t bytes = 0;
  for (const Slot& sl : slots_)
    if (!sl.spec.tp_split) {
      views.push_back(b_.view(buckets_[static_cast<size_t>(sl.bucket)].grads, {sl.spec.elements()}, sl.offset));
      bytes += sl.spec.elements() * bytes_of(grad_dtype_);
    }
  if (views.empty()) return;
  OpSpec spec;
  spec.kind = OpKind::collective;
  spec.stream = Stream::tp_comm;
  spec.name = "replicated_grad_all_reduce";
  spec.reads = views;
  spec.writes = views;
  spec.attrs = CollectiveAttrs{CollKind::all_reduce, GroupKind::tp, ReduceOp::sum, bytes, b_.next_tag()};
  spec.bytes = static_cast<double>(bytes);
  b_.add(std::move(spec));
}

// Tied word embeddings: the first stage's table and the last stage's copy sum their gradients
// (Megatron's embedding group). Each table is alone in its bucket, so shards line up.
void ParamStore::emit_tied_embedding_reduce() {
  if (!m_.tied || m_.pp == 1) return;
  for (const Slot& sl : slots_) {
    if (sl.spec.role != ParamRole::word_emb && sl.spec.role != ParamRole::out_w) continue;
    const Bucket& bk = buckets_[static_cast<size_t>(sl.bucket)];
    const TensorRef t = grad_target(bk);
    collective("tied_embedding_all_reduce", CollKind::all_reduce, GroupKind::embd, ReduceOp::sum, {t}, {t},
               t.bytes(), kTagEmbeddingGrads);
  }
}

void ParamStore::end_step() {
  // Reductions not overlapped with the backward pass run now, in bucket order. Without
  // overlap_grad_reduce Megatron starts them after the whole backward pass (finalize_model_grads
  // after forward_backward_func), not as soon as a bucket's gradients are final: the first one
  // waits for the last compute op (the rest follow on the stream).
  const OpId backward_end = b_.last_op(Stream::compute);
  const size_t first_reduce = b_.size();
  for (size_t bi = 0; bi < buckets_.size(); ++bi)
    if (!shard_grads_) reduce(static_cast<int>(bi));
  if ((!s_.parallel.overlap_grad_reduce || dataparallel_) && backward_end != kNoOp && b_.size() > first_reduce)
    b_.depend(static_cast<OpId>(first_reduce), backward_end);
  emit_replicated_grad_reduce();
  emit_tied_embedding_reduce();

  const bool fp16 = s_.training.precision == Precision::fp16;
  const bool clip = s_.training.clip_grad > 0;
  // Loss scaling and clipping need a verdict over every gradient of the model: all stages and,
  // when gradients are sharded, all data-parallel ranks too.
  const GroupKind everyone = shard_opt_ ? GroupKind::world : GroupKind::mp;
  auto scalar_reduce = [&](const char* kernel_name, OpKind kind, const char* coll_name, ReduceOp op,
                           uint32_t tag) {
    const BufferId flag = b_.buffer(std::string(kernel_name) + ".partial", 1, DType::f32, MemCategory::buffers);
    for (const Bucket& bk : buckets_) {
      OpSpec spec;
      spec.kind = kind;
      spec.name = kernel_name;
      const TensorRef g = grad_target(bk);
      spec.reads = {g, b_.whole(flag)};
      spec.writes = {b_.whole(flag)};
      spec.attrs = KernelAttrs{g.numel(), 1, 0, 0, 1, 0};
      spec.flops = 2.0 * static_cast<double>(g.numel());
      b_.add(std::move(spec));
    }
    collective(coll_name, CollKind::all_reduce, everyone, op, {b_.whole(flag)}, {b_.whole(flag)}, 4, tag);
    return flag;
  };
  BufferId found_inf = 0, norm = 0;
  if (fp16) found_inf = scalar_reduce("overflow_check", OpKind::overflow_check, "found_inf_all_reduce", ReduceOp::max, kTagFoundInf);
  if (clip) norm = scalar_reduce("grad_norm", OpKind::grad_norm, "grad_norm_all_reduce", ReduceOp::sum, kTagGradNorm);

  emit_optimizer(fp16 ? std::optional<BufferId>(found_inf) : std::nullopt,
                 clip ? std::optional<BufferId>(norm) : std::nullopt);
  if (fp16) {
    OpSpec spec;
    spec.kind = OpKind::scaler_update;
    spec.name = "loss_scaler_update";
    spec.reads = {b_.whole(found_inf)};
    spec.writes = {b_.whole(found_inf)};
    spec.attrs = KernelAttrs{1, 1, 0, 0, static_cast<float>(s_.training.initial_loss_scale), s_.training.loss_scale_window};
    b_.add(std::move(spec));
    b_.release(found_inf);
  }
  if (clip) b_.release(norm);
  if (!s_.parallel.overlap_param_gather)
    for (int bi = static_cast<int>(buckets_.size()) - 1; bi >= 0; --bi) all_gather_weights(bi);
}

}  // namespace paralab
