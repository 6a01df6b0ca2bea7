// paralab — the first and last pieces of the model. Embedding: Megatron's vocabulary-parallel
// lookup (each TP rank holds V/t rows; partial results reduced over TP, or reduce-scattered
// with sequence parallelism), learned positions, embedding dropout. Head: final norm, output
// layer (tied to the word embedding unless untied), and Megatron's vocab-parallel
// cross-entropy: local max -> all-reduce(max) -> local sum of exp and target logit ->
// all-reduce(sum) -> loss; the fp32 softmax is kept for the backward pass.
#include "ir/stage_builder.hpp"

namespace paralab {

EmbeddingActs StageBuilder::embedding_forward() {
  const int64_t T = m_.tokens(), h = m_.hidden;
  const int u = store_.embedding_unit();
  EmbeddingActs e;
  e.ids = act_buffer("token_ids", T, 1, DType::i32);
  if (dataparallel()) dp_scatter("input_scatter", act_buffer("token_ids_batch", dp_rows(T), 1, DType::i32), e.ids);
  const BufferId partial = act_buffer("embedding", T, h, m_.act);
  std::vector<TensorRef> r{b_.whole(e.ids), store_.weight(u, ParamRole::word_emb)};
  if (store_.has(u, ParamRole::pos_emb)) r.push_back(store_.weight(u, ParamRole::pos_emb));
  OpSpec o;
  o.kind = OpKind::embedding_fwd;
  o.name = "embedding";
  o.reads = r;
  o.writes = {b_.view(partial, {T, h})};
  o.attrs = KernelAttrs{T, h, 0, 0, 1, 0};
  // A gather: T rows of the table (and of the position table), not the whole table.
  o.bytes = static_cast<double>(T * 4 + (r.size() - 1 + 1) * T * h * bytes_of(m_.act));
  b_.add(std::move(o));
  const BufferId reduced = tp_exit("embedding_reduce", partial);
  const int64_t Tsp = m_.tokens_sp();
  if (m_.hidden_dropout > 0) {
    e.out = act_buffer("embedding_out", Tsp, h, m_.act);
    e.mask = act_buffer("embedding_mask", Tsp, h, DType::u8);
    kernel(OpKind::dropout_fwd, "embedding_dropout", {b_.view(reduced, {Tsp, h})},
           {b_.view(e.out, {Tsp, h}), b_.view(e.mask, {Tsp, h})},
           KernelAttrs{Tsp, h, static_cast<float>(m_.hidden_dropout), 0, 1, 0}, 2);
    b_.release(reduced);
  } else {
    e.out = reduced;
  }
  return e;
}

void StageBuilder::embedding_backward(EmbeddingActs& e, BufferId dy) {
  const int64_t T = m_.tokens(), Tsp = m_.tokens_sp(), h = m_.hidden;
  const int u = store_.embedding_unit();
  if (e.mask != kNoBuffer)
    kernel(OpKind::dropout_bwd, "embedding_dropout_bwd", {b_.view(dy, {Tsp, h}), b_.view(e.mask, {Tsp, h})},
           {b_.view(dy, {Tsp, h})}, KernelAttrs{Tsp, h, static_cast<float>(m_.hidden_dropout), 0, 1, 0}, 2);
  release_if(e.mask);
  const BufferId d_full = tp_enter("embedding_grad_all_gather", dy);
  std::vector<TensorRef> w{store_.grad(u, ParamRole::word_emb)};
  if (store_.has(u, ParamRole::pos_emb)) w.push_back(store_.grad(u, ParamRole::pos_emb));
  OpSpec o;
  o.kind = OpKind::embedding_bwd;
  o.name = "embedding_bwd";
  o.reads = {b_.view(d_full, {T, h}), b_.whole(e.ids)};
  o.writes = w;
  o.attrs = KernelAttrs{T, h, 0, 0, 1, 0};
  o.bytes = static_cast<double>(T * 4 + (1 + 2 * w.size()) * T * h * bytes_of(m_.act));
  b_.add(std::move(o));
  store_.grad_done(u, ParamRole::word_emb);
  if (store_.has(u, ParamRole::pos_emb)) store_.grad_done(u, ParamRole::pos_emb);
  if (m_.sp) b_.release(d_full);
  release_if(e.ids);
}

HeadActs StageBuilder::head_forward(BufferId x) {
  const int64_t T = m_.tokens(), Tsp = m_.tokens_sp(), h = m_.hidden, V = m_.vocab_local();
  const int u = store_.head_unit();
  HeadActs hd;
  hd.x = x;
  hd.lnf = act_buffer("lnf", Tsp, h, m_.act);
  hd.stats = act_buffer("lnf_stats", Tsp, 2, DType::f32);
  std::vector<TensorRef> r{b_.view(x, {Tsp, h}), store_.weight(u, ParamRole::lnf_w)};
  if (store_.has(u, ParamRole::lnf_b)) r.push_back(store_.weight(u, ParamRole::lnf_b));
  kernel(m_.norm == Normalization::layernorm ? OpKind::layernorm_fwd : OpKind::rmsnorm_fwd, "final_norm", r,
         {b_.view(hd.lnf, {Tsp, h}), b_.view(hd.stats, {Tsp, 2})},
         KernelAttrs{Tsp, h, 0, static_cast<float>(s_.model.norm_epsilon), 1, 0}, 8);
  const BufferId lnf_full = tp_enter("final_norm_all_gather", hd.lnf);
  // Output layer: logits[T, V/t] = lnf[T, h] * W^T, W the [V/t, h] (tied) embedding table.
  const int eu = store_.has(u, ParamRole::out_w) ? u : store_.embedding_unit();
  const ParamRole wr = store_.has(u, ParamRole::out_w) ? ParamRole::out_w : ParamRole::word_emb;
  const BufferId logits = act_buffer("logits", T, V, m_.act, MemCategory::buffers);
  linear("output_layer", GemmRole::linear_fwd, b_.view(lnf_full, {T, h}), store_.weight(eu, wr),
         b_.view(logits, {T, V}), T, V, h, false, true, false);
  if (m_.sp) b_.release(lnf_full);

  // nn.DataParallel: the loss over the whole batch, on device 0, from the gathered logits.
  const int64_t R = dp_rows(T);
  const BufferId scores = dataparallel() ? dp_gather("output_gather", logits) : logits;
  const BufferId rowmax = act_buffer("xent_max", R, 1, DType::f32, MemCategory::buffers);
  kernel(OpKind::xent_max, "xent_max", {b_.whole(scores)}, {b_.whole(rowmax)}, KernelAttrs{R, V, 0, 0, 1, 0}, 1);
  tp_all_reduce("xent_max_all_reduce", rowmax, ReduceOp::max);
  hd.labels = act_buffer("labels", R, 1, DType::i32);
  hd.probs = act_buffer("xent_softmax", R, V, DType::f32);
  hd.sums = act_buffer("xent_sums", R, 2, DType::f32);  // sum of exp, target logit
  kernel(OpKind::xent_sum, "xent_sum", {b_.whole(scores), b_.whole(rowmax), b_.whole(hd.labels)},
         {b_.whole(hd.probs), b_.whole(hd.sums)}, KernelAttrs{R, V, 0, 0, 1, 0}, 4);
  b_.release(scores);
  tp_all_reduce("xent_sum_all_reduce", hd.sums);
  hd.loss = act_buffer("loss", R, 1, DType::f32);
  kernel(OpKind::xent_loss, "xent_loss", {b_.whole(hd.sums), b_.whole(rowmax)}, {b_.whole(hd.loss)},
         KernelAttrs{R, 1, 0, 0, 1, 0}, 4);
  b_.release(rowmax);
  return hd;
}

BufferId StageBuilder::head_backward(HeadActs& hd) {
  const int64_t T = m_.tokens(), Tsp = m_.tokens_sp(), h = m_.hidden, V = m_.vocab_local();
  const int u = store_.head_unit();
  // dlogits = (softmax - onehot) * dloss; the fp16 loss scale multiplies in here.
  const float loss_scale = s_.training.precision == Precision::fp16 ? static_cast<float>(s_.training.initial_loss_scale) : 1.0f;
  const int64_t R = dp_rows(T);
  const BufferId d_scores = act_buffer(dataparallel() ? "d_logits_batch" : "d_logits", R, V, m_.act, MemCategory::buffers);
  kernel(OpKind::xent_bwd, "xent_bwd", {b_.whole(hd.probs), b_.whole(hd.sums), b_.whole(hd.labels), b_.whole(hd.loss)},
         {b_.whole(d_scores)}, KernelAttrs{R, V, 0, 0, loss_scale, microbatches_}, 3);
  BufferId d_logits = d_scores;
  if (dataparallel()) {  // the output gradient back to every replica (Gather's backward)
    d_logits = act_buffer("d_logits", T, V, m_.act, MemCategory::buffers);
    dp_scatter("output_grad_scatter", d_scores, d_logits);
  }
  release_if(hd.probs);
  release_if(hd.sums);
  release_if(hd.labels);
  release_if(hd.loss);

  const bool own = store_.has(u, ParamRole::out_w);
  const int eu = own ? u : store_.embedding_unit();
  const ParamRole wr = own ? ParamRole::out_w : ParamRole::word_emb;
  const BufferId lnf_full = m_.sp ? tp_all_gather("final_norm_all_gather_bwd", hd.lnf) : hd.lnf;
  const BufferId d_lnf = act_buffer("d_final_norm", T, h, m_.act);
  linear("output_layer_dgrad", GemmRole::linear_dgrad, b_.view(d_logits, {T, V}), store_.weight(eu, wr),
         b_.view(d_lnf, {T, h}), T, h, V, false, false, false);
  // A table tied within one stage gets its second gradient in the embedding backward, which
  // reports it complete.
  const BufferId d_lnf_red = dgrad_reduce_and_wgrad("output_layer_dgrad_reduce", d_lnf, {d_logits, lnf_full}, [=, this] {
    const OpId id = linear("output_layer_wgrad", GemmRole::linear_wgrad, b_.view(d_logits, {T, V}),
                           b_.view(lnf_full, {T, h}), store_.grad(eu, wr), V, h, T, true, false, true);
    if (own) store_.grad_done(u, ParamRole::out_w);
    return id;
  });
  b_.release(d_logits);
  if (m_.sp) b_.release(lnf_full);

  // The residual-stream gradient starts here (the norm backward writes, not accumulates).
  const BufferId dy = act_buffer("d_residual", Tsp, h, m_.act);
  std::vector<TensorRef> r{b_.view(d_lnf_red, {Tsp, h}), b_.view(hd.x, {Tsp, h}), b_.view(hd.stats, {Tsp, 2}),
                           store_.weight(u, ParamRole::lnf_w)};
  std::vector<TensorRef> w{b_.view(dy, {Tsp, h}), store_.grad(u, ParamRole::lnf_w)};
  if (store_.has(u, ParamRole::lnf_b)) w.push_back(store_.grad(u, ParamRole::lnf_b));
  kernel(m_.norm == Normalization::layernorm ? OpKind::layernorm_bwd : OpKind::rmsnorm_bwd, "final_norm_bwd", r, w,
         KernelAttrs{Tsp, h, 0, static_cast<float>(s_.model.norm_epsilon), 1, 0}, 12);
  store_.grad_done(u, ParamRole::lnf_w);
  if (store_.has(u, ParamRole::lnf_b)) store_.grad_done(u, ParamRole::lnf_b);
  b_.release(d_lnf_red);
  release_if(hd.lnf);
  release_if(hd.stats);
  release_if(hd.x);
  return dy;
}

}  // namespace paralab
