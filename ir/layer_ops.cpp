// paralab — one transformer layer, forward and backward, as Megatron-LM runs it:
// norm -> [SP all-gather] -> QKV (column parallel) -> [RoPE] -> attention core -> projection
// (row parallel) -> [all-reduce | SP reduce-scatter] -> bias-dropout-add -> norm -> [SP
// all-gather] -> FC1 -> GELU|SwiGLU -> FC2 -> [all-reduce | reduce-scatter] -> bias-dropout-add.
// Backward overlaps each input-gradient reduction with the weight-gradient GEMM (Megatron's
// async TP all-reduce) and, with SP, re-gathers the norm output for the weight gradient.
// Saved activations follow Korthikanti et al. 2022, Sec. 4.1 (34sbh + 5as^2b per layer).
#include <cmath>

#include "ir/stage_builder.hpp"

namespace paralab {

namespace {
OpKind norm_fwd_kind(Normalization n) {
  return n == Normalization::layernorm ? OpKind::layernorm_fwd : OpKind::rmsnorm_fwd;
}
OpKind norm_bwd_kind(Normalization n) {
  return n == Normalization::layernorm ? OpKind::layernorm_bwd : OpKind::rmsnorm_bwd;
}
}  // namespace

LayerActs StageBuilder::layer_forward(int64_t layer, BufferId x, Recompute policy, bool recomputing) {
  const int64_t T = m_.tokens(), Tsp = m_.tokens_sp(), h = m_.hidden;
  const float eps = static_cast<float>(s_.model.norm_epsilon);
  const int u = store_.layer_unit(layer);
  LayerActs a;
  a.x = x;

  // Input norm.
  a.ln1 = act_buffer("ln1", Tsp, h, m_.act);
  a.ln1_stats = act_buffer("ln1_stats", Tsp, 2, DType::f32);
  std::vector<TensorRef> r{b_.view(x, {Tsp, h}), store_.weight(u, ParamRole::ln1_w)};
  if (store_.has(u, ParamRole::ln1_b)) r.push_back(store_.weight(u, ParamRole::ln1_b));
  kernel(norm_fwd_kind(m_.norm), "ln1", r, {b_.view(a.ln1, {Tsp, h}), b_.view(a.ln1_stats, {Tsp, 2})},
         KernelAttrs{Tsp, h, 0, eps, 1, 0}, 8);

  // QKV projection (column parallel).
  BufferId ln1_full = tp_enter("ln1_all_gather", a.ln1);
  a.qkv = act_buffer("qkv", T, m_.qkv_cols(), m_.act);
  TensorRef qkv_b;
  const bool qb = store_.has(u, ParamRole::qkv_b);
  if (qb) qkv_b = store_.weight(u, ParamRole::qkv_b);
  linear("qkv", GemmRole::linear_fwd, b_.view(ln1_full, {T, h}), store_.weight(u, ParamRole::qkv_w),
         b_.view(a.qkv, {T, m_.qkv_cols()}), T, m_.qkv_cols(), h, false, false, false, qb ? &qkv_b : nullptr);
  if (m_.sp) b_.release(ln1_full);
  if (m_.positions == PositionEmbedding::rope)
    kernel(OpKind::rope_fwd, "rope", {b_.whole(a.qkv)}, {b_.whole(a.qkv)},
           KernelAttrs{T, m_.qkv_cols(), 0, 0, static_cast<float>(s_.model.rotary_base), m_.seq_local()}, 6);

  // Attention core; under selective recomputation its s^2 intermediates are not kept.
  const bool keep_core = recomputing || policy == Recompute::none;
  attention_forward(layer, a, keep_core);

  // Output projection (row parallel) and its reduction.
  const BufferId proj = act_buffer("proj", T, h, m_.act);
  linear("proj", GemmRole::linear_fwd, b_.view(a.ctx, {T, m_.attn_cols()}), store_.weight(u, ParamRole::proj_w),
         b_.view(proj, {T, h}), T, h, m_.attn_cols(), false, false, false);
  BufferId branch = tp_exit("proj_reduce", proj);

  // Bias-dropout-add (residual), Megatron's fused bias_dropout_add.
  const float p = static_cast<float>(m_.hidden_dropout);
  a.h1 = act_buffer("h1", Tsp, h, m_.act);
  r = {b_.view(branch, {Tsp, h}), b_.view(x, {Tsp, h})};
  if (store_.has(u, ParamRole::proj_b)) r.push_back(store_.weight(u, ParamRole::proj_b));
  std::vector<TensorRef> w{b_.view(a.h1, {Tsp, h})};
  if (p > 0) {
    a.mask1 = act_buffer("mask1", Tsp, h, DType::u8);
    w.push_back(b_.view(a.mask1, {Tsp, h}));
  }
  kernel(OpKind::dropout_add_fwd, "bias_dropout_add1", r, w, KernelAttrs{Tsp, h, p, 0, 1, 0}, 3);
  b_.release(branch);

  // MLP: norm, FC1 (column parallel), activation, FC2 (row parallel).
  a.ln2 = act_buffer("ln2", Tsp, h, m_.act);
  a.ln2_stats = act_buffer("ln2_stats", Tsp, 2, DType::f32);
  r = {b_.view(a.h1, {Tsp, h}), store_.weight(u, ParamRole::ln2_w)};
  if (store_.has(u, ParamRole::ln2_b)) r.push_back(store_.weight(u, ParamRole::ln2_b));
  kernel(norm_fwd_kind(m_.norm), "ln2", r, {b_.view(a.ln2, {Tsp, h}), b_.view(a.ln2_stats, {Tsp, 2})},
         KernelAttrs{Tsp, h, 0, eps, 1, 0}, 8);
  BufferId ln2_full = tp_enter("ln2_all_gather", a.ln2);
  a.fc1 = act_buffer("fc1", T, m_.fc1_cols(), m_.act);
  TensorRef fc1_b;
  const bool fb = store_.has(u, ParamRole::fc1_b);
  if (fb) fc1_b = store_.weight(u, ParamRole::fc1_b);
  linear("fc1", GemmRole::linear_fwd, b_.view(ln2_full, {T, h}), store_.weight(u, ParamRole::fc1_w),
         b_.view(a.fc1, {T, m_.fc1_cols()}), T, m_.fc1_cols(), h, false, false, false, fb ? &fc1_b : nullptr);
  if (m_.sp) b_.release(ln2_full);
  a.act = act_buffer("act", T, m_.ffn_local(), m_.act);
  kernel(m_.activation == Activation::gelu ? OpKind::gelu_fwd : OpKind::swiglu_fwd,
         m_.activation == Activation::gelu ? "gelu" : "swiglu", {b_.whole(a.fc1)}, {b_.whole(a.act)},
         KernelAttrs{T, m_.ffn_local(), 0, 0, 1, 0}, 10);
  const BufferId fc2 = act_buffer("fc2", T, h, m_.act);
  linear("fc2", GemmRole::linear_fwd, b_.view(a.act, {T, m_.ffn_local()}), store_.weight(u, ParamRole::fc2_w),
         b_.view(fc2, {T, h}), T, h, m_.ffn_local(), false, false, false);
  branch = tp_exit("fc2_reduce", fc2);

  a.out = act_buffer("out", Tsp, h, m_.act);
  r = {b_.view(branch, {Tsp, h}), b_.view(a.h1, {Tsp, h})};
  if (store_.has(u, ParamRole::fc2_b)) r.push_back(store_.weight(u, ParamRole::fc2_b));
  w = {b_.view(a.out, {Tsp, h})};
  if (p > 0) {
    a.mask2 = act_buffer("mask2", Tsp, h, DType::u8);
    w.push_back(b_.view(a.mask2, {Tsp, h}));
  }
  kernel(OpKind::dropout_add_fwd, "bias_dropout_add2", r, w, KernelAttrs{Tsp, h, p, 0, 1, 0}, 3);
  b_.release(branch);

  // Full recomputation keeps only the layer input (Korthikanti et al. 2022 Table 2: 2sbh).
  if (policy == Recompute::full && !recomputing)
    for (BufferId* keep : {&a.ln1, &a.ln1_stats, &a.qkv, &a.lse, &a.probs, &a.attn_mask, &a.attn_drop, &a.ctx,
                           &a.mask1, &a.h1, &a.ln2, &a.ln2_stats, &a.fc1, &a.act, &a.mask2})
      release_if(*keep);
  return a;
}

void StageBuilder::layer_backward(int64_t layer, LayerActs& a, BufferId dy) {
  const int64_t T = m_.tokens(), Tsp = m_.tokens_sp(), h = m_.hidden;
  const float eps = static_cast<float>(s_.model.norm_epsilon);
  const float p = static_cast<float>(m_.hidden_dropout);
  const int u = store_.layer_unit(layer);

  // d(branch) of a bias-dropout-add; with no dropout and no bias it is dy itself (no kernel).
  auto branch_grad = [&](const char* name, BufferId& mask, ParamRole bias, bool& owned) {
    const bool has_bias = store_.has(u, bias);
    // A deferred W reads the branch gradient after the norm backward has overwritten dy: copy.
    if (p == 0 && !has_bias && !deferring_weight_grads()) {
      owned = false;
      return dy;
    }
    owned = true;
    const BufferId d = act_buffer(name, Tsp, h, m_.act);
    std::vector<TensorRef> r{b_.view(dy, {Tsp, h})};
    if (mask != kNoBuffer) r.push_back(b_.view(mask, {Tsp, h}));
    std::vector<TensorRef> w{b_.view(d, {Tsp, h})};
    if (has_bias) w.push_back(store_.grad(u, bias));
    kernel(OpKind::dropout_add_bwd, name, r, w, KernelAttrs{Tsp, h, p, 0, 1, 0}, 2);
    if (has_bias) store_.grad_done(u, bias);
    release_if(mask);
    return d;
  };
  // Column-parallel backward: input gradient reduced over TP while the weight gradient runs
  // (async_tensor_model_parallel_allreduce; off: after it, dgrad_reduce_and_wgrad).
  auto column_backward = [&](const char* dgrad, const char* reduce, const char* wgrad, const char* regather,
                             BufferId d_out, int64_t cols, BufferId norm_out, ParamRole w_role, ParamRole b_role) {
    const BufferId in_full = m_.sp ? tp_all_gather(regather, norm_out) : norm_out;
    const BufferId d_in = act_buffer(dgrad, T, h, m_.act);
    linear(dgrad, GemmRole::linear_dgrad, b_.view(d_out, {T, cols}), store_.weight(u, w_role),
           b_.view(d_in, {T, h}), T, h, cols, false, true, false);
    const bool has_b = store_.has(u, b_role);
    const BufferId d_in_red = dgrad_reduce_and_wgrad(reduce, d_in, {in_full, d_out}, [=, this] {
      TensorRef bg;
      if (has_b) bg = store_.grad(u, b_role);
      const OpId id = linear(wgrad, GemmRole::linear_wgrad, b_.view(in_full, {T, h}), b_.view(d_out, {T, cols}),
                             store_.grad(u, w_role), h, cols, T, true, false, true, nullptr, has_b ? &bg : nullptr);
      store_.grad_done(u, w_role);
      if (has_b) store_.grad_done(u, b_role);
      return id;
    });
    if (m_.sp) b_.release(in_full);
    return d_in_red;
  };
  auto norm_backward = [&](const char* name, BufferId d_out, BufferId in, BufferId stats, ParamRole w_role,
                           ParamRole b_role) {
    std::vector<TensorRef> r{b_.view(d_out, {Tsp, h}), b_.view(in, {Tsp, h}), b_.view(stats, {Tsp, 2}),
                             store_.weight(u, w_role), b_.view(dy, {Tsp, h})};
    std::vector<TensorRef> w{b_.view(dy, {Tsp, h}), store_.grad(u, w_role)};
    if (store_.has(u, b_role)) w.push_back(store_.grad(u, b_role));
    kernel(norm_bwd_kind(m_.norm), name, r, w, KernelAttrs{Tsp, h, 0, eps, 1, 1}, 12);
    store_.grad_done(u, w_role);
    if (store_.has(u, b_role)) store_.grad_done(u, b_role);
  };

  // MLP branch.
  bool owned = false;
  const BufferId d_b2 = branch_grad("bias_dropout_add2_bwd", a.mask2, ParamRole::fc2_b, owned);
  const BufferId d_fc2 = m_.sp ? tp_all_gather("fc2_out_grad_all_gather", d_b2) : d_b2;
  if (m_.sp && owned) b_.release(d_b2);
  const BufferId d_act = act_buffer("d_act", T, m_.ffn_local(), m_.act);
  linear("fc2_dgrad", GemmRole::linear_dgrad, b_.view(d_fc2, {T, h}), store_.weight(u, ParamRole::fc2_w),
         b_.view(d_act, {T, m_.ffn_local()}), T, m_.ffn_local(), h, false, true, false);
  weight_grad({a.act, d_fc2}, [=, this, act = a.act] {
    const OpId id = linear("fc2_wgrad", GemmRole::linear_wgrad, b_.view(act, {T, m_.ffn_local()}),
                           b_.view(d_fc2, {T, h}), store_.grad(u, ParamRole::fc2_w), m_.ffn_local(), h, T, true,
                           false, true);
    store_.grad_done(u, ParamRole::fc2_w);
    return id;
  });
  if (m_.sp || owned) b_.release(d_fc2);
  release_if(a.act);
  const BufferId d_fc1 = act_buffer("d_fc1", T, m_.fc1_cols(), m_.act);
  kernel(m_.activation == Activation::gelu ? OpKind::gelu_bwd : OpKind::swiglu_bwd,
         m_.activation == Activation::gelu ? "gelu_bwd" : "swiglu_bwd", {b_.whole(d_act), b_.whole(a.fc1)},
         {b_.whole(d_fc1)}, KernelAttrs{T, m_.ffn_local(), 0, 0, 1, 0}, 12);
  b_.release(d_act);
  release_if(a.fc1);
  const BufferId d_ln2 = column_backward("fc1_dgrad", "fc1_dgrad_reduce", "fc1_wgrad", "ln2_all_gather_bwd", d_fc1,
                                         m_.fc1_cols(), a.ln2, ParamRole::fc1_w, ParamRole::fc1_b);
  b_.release(d_fc1);
  norm_backward("ln2_bwd", d_ln2, a.h1, a.ln2_stats, ParamRole::ln2_w, ParamRole::ln2_b);
  b_.release(d_ln2);
  release_if(a.ln2);
  release_if(a.ln2_stats);
  release_if(a.h1);

  // Attention branch.
  const BufferId d_b1 = branch_grad("bias_dropout_add1_bwd", a.mask1, ParamRole::proj_b, owned);
  const BufferId d_proj = m_.sp ? tp_all_gather("proj_out_grad_all_gather", d_b1) : d_b1;
  if (m_.sp && owned) b_.release(d_b1);
  const BufferId d_ctx = act_buffer("d_ctx", T, m_.attn_cols(), m_.act);
  linear("proj_dgrad", GemmRole::linear_dgrad, b_.view(d_proj, {T, h}), store_.weight(u, ParamRole::proj_w),
         b_.view(d_ctx, {T, m_.attn_cols()}), T, m_.attn_cols(), h, false, true, false);
  weight_grad({a.ctx, d_proj}, [=, this, ctx = a.ctx] {
    const OpId id = linear("proj_wgrad", GemmRole::linear_wgrad, b_.view(ctx, {T, m_.attn_cols()}),
                           b_.view(d_proj, {T, h}), store_.grad(u, ParamRole::proj_w), m_.attn_cols(), h, T, true,
                           false, true);
    store_.grad_done(u, ParamRole::proj_w);
    return id;
  });
  if (m_.sp || owned) b_.release(d_proj);
  const BufferId d_qkv = act_buffer("d_qkv", T, m_.qkv_cols(), m_.act);
  attention_backward(layer, a, d_ctx, d_qkv);
  b_.release(d_ctx);
  release_if(a.ctx);
  release_if(a.qkv);
  if (m_.positions == PositionEmbedding::rope)
    kernel(OpKind::rope_bwd, "rope_bwd", {b_.whole(d_qkv)}, {b_.whole(d_qkv)},
           KernelAttrs{T, m_.qkv_cols(), 0, 0, static_cast<float>(s_.model.rotary_base), m_.seq_local()}, 6);
  const BufferId d_ln1 = column_backward("qkv_dgrad", "qkv_dgrad_reduce", "qkv_wgrad", "ln1_all_gather_bwd", d_qkv,
                                         m_.qkv_cols(), a.ln1, ParamRole::qkv_w, ParamRole::qkv_b);
  b_.release(d_qkv);
  norm_backward("ln1_bwd", d_ln1, a.x, a.ln1_stats, ParamRole::ln1_w, ParamRole::ln1_b);
  b_.release(d_ln1);
  release_if(a.ln1);
  release_if(a.ln1_stats);
  release_if(a.x);
}

}  // namespace paralab
