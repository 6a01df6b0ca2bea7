// paralab — the attention core of a layer. Fused (flash) attention keeps only the output and
// the per-row log-sum-exp and recomputes the scores in its backward (Dao et al. 2022); the
// unfused path is Megatron's: batched QK^T GEMM, fused scale-mask-softmax, dropout, batched
// PV GEMM, keeping the s^2 softmax output, dropout mask and dropout output (Korthikanti et al.
// 2022, Sec. 4.1: 5as^2b bytes per layer). Context parallelism runs ring attention (Liu et al.
// 2023; Megatron-LM context parallel): KV blocks travel around the CP ring while each rank
// attends its queries to the block it holds.
#include <cmath>

#include "ir/stage_builder.hpp"

namespace paralab {

namespace {
// FLOPs of one attention pass over sq queries x sk keys (QK^T and PV), as Korthikanti et al.
// Eq. 7 counts them (4 b s^2 h per layer): no discount for the causal mask.
double attention_flops(const ModelShape& m, int64_t sq, int64_t sk) {
  return 4.0 * static_cast<double>(m.micro_batch * m.heads_local()) * static_cast<double>(sq) *
         static_cast<double>(sk) * static_cast<double>(m.head_dim);
}
}  // namespace

BufferId StageBuilder::attention_forward(int64_t layer, LayerActs& a, bool keep_core) {
  const int64_t T = m_.tokens(), s = m_.seq_local(), bh = m_.micro_batch * m_.heads_local();
  a.ctx = act_buffer("ctx", T, m_.attn_cols(), m_.act);
  if (s_.training.attention == AttentionImpl::flash) {
    a.lse = act_buffer("lse", bh, s, DType::f32);
    BufferId kv = kNoBuffer;  // the KV block held at this ring step (kNoBuffer: our own, in qkv)
    const int64_t kv_cols = 2 * m_.groups_local() * m_.head_dim;
    for (int32_t step = 0; step < m_.cp; ++step) {
      BufferId next = kNoBuffer;
      if (step + 1 < m_.cp) {  // pass the block on while attending to it
        next = act_buffer("kv_ring", T, kv_cols, m_.act, MemCategory::buffers);
        OpSpec x;
        x.kind = OpKind::sendrecv;
        x.stream = Stream::cp_comm;
        x.name = "kv_ring_exchange";
        x.reads = {b_.whole(kv == kNoBuffer ? a.qkv : kv)};
        x.writes = {b_.whole(next)};
        const int64_t bytes = T * kv_cols * bytes_of(m_.act);
        x.attrs = P2PAttrs{GroupKind::cp, 1, -1, bytes, b_.next_tag(), 1};
        x.bytes = static_cast<double>(bytes);
        b_.add(std::move(x));
      }
      OpSpec o;
      o.kind = OpKind::attention_fwd;
      o.name = m_.cp > 1 ? "ring_attention" : "flash_attention";
      o.reads = {b_.whole(a.qkv)};
      if (kv != kNoBuffer) o.reads.push_back(b_.whole(kv));
      if (step > 0) o.reads.insert(o.reads.end(), {b_.whole(a.ctx), b_.whole(a.lse)});
      o.writes = {b_.whole(a.ctx), b_.whole(a.lse)};
      o.attrs = AttentionAttrs{m_.micro_batch, m_.heads_local(), m_.groups_local(), s, s, m_.head_dim, true,
                               step, static_cast<int32_t>(m_.cp), m_.attention_math()};
      o.flops = attention_flops(m_, s, s);
      o.model_flops = model_part(o.flops);
      b_.add(std::move(o));
      if (kv != kNoBuffer) b_.release(kv);
      kv = next;
    }
    return a.ctx;
  }
  recompute_attention_core(layer, a);  // scores -> probs -> dropout (the unfused forward)
  const BufferId p = a.attn_drop != kNoBuffer ? a.attn_drop : a.probs;
  OpSpec o;
  o.kind = OpKind::gemm;
  o.name = "attn_pv";
  o.reads = {b_.whole(p), b_.whole(a.qkv)};
  o.writes = {b_.whole(a.ctx)};
  GemmAttrs g;
  g.m = s;
  g.n = m_.head_dim;
  g.k = s;
  g.batch = bh;
  g.math = m_.attention_math();
  g.role = GemmRole::attn_pv;
  o.attrs = g;
  o.flops = attention_flops(m_, s, s) / 2;
  o.model_flops = model_part(o.flops);
  b_.add(std::move(o));
  if (!keep_core) {
    release_if(a.probs);
    release_if(a.attn_mask);
    release_if(a.attn_drop);
  }
  return a.ctx;
}

// The unfused attention core up to the dropout: QK^T, scale-mask-softmax, dropout. Used by the
// forward pass and, under selective recomputation, again right before the backward pass.
void StageBuilder::recompute_attention_core(int64_t layer, LayerActs& a) {
  (void)layer;
  const int64_t s = m_.seq_local(), bh = m_.micro_batch * m_.heads_local();
  const BufferId scores = act_buffer("scores", bh * s, s, m_.act, MemCategory::buffers);
  OpSpec o;
  o.kind = OpKind::gemm;
  o.name = "attn_qk";
  o.reads = {b_.whole(a.qkv)};
  o.writes = {b_.whole(scores)};
  GemmAttrs g;
  g.m = s;
  g.n = s;
  g.k = m_.head_dim;
  g.batch = bh;
  g.trans_b = true;
  g.math = m_.attention_math();
  g.role = GemmRole::attn_qk;
  o.attrs = g;
  o.flops = attention_flops(m_, s, s) / 2;
  o.model_flops = model_part(o.flops);
  // Q and K of the local heads in, scores out.
  o.bytes = static_cast<double>((m_.tokens() * (m_.attn_cols() + m_.groups_local() * m_.head_dim) + bh * s * s) *
                                bytes_of(m_.act));
  b_.add(std::move(o));
  a.probs = act_buffer("probs", bh * s, s, m_.act);
  const float scale = 1.0f / std::sqrt(static_cast<float>(m_.head_dim));
  kernel(OpKind::softmax_fwd, "scale_mask_softmax", {b_.whole(scores)}, {b_.whole(a.probs)},
         KernelAttrs{bh * s, s, 0, 0, scale, 0}, 5);
  b_.release(scores);
  if (m_.attention_dropout > 0) {
    a.attn_mask = act_buffer("attn_mask", bh * s, s, DType::u8);
    a.attn_drop = act_buffer("attn_drop", bh * s, s, m_.act);
    kernel(OpKind::dropout_fwd, "attn_dropout", {b_.whole(a.probs)}, {b_.whole(a.attn_drop), b_.whole(a.attn_mask)},
           KernelAttrs{bh * s, s, static_cast<float>(m_.attention_dropout), 0, 1, 0}, 2);
  }
}

void StageBuilder::attention_backward(int64_t layer, LayerActs& a, BufferId d_ctx, BufferId d_qkv) {
  const int64_t T = m_.tokens(), s = m_.seq_local(), bh = m_.micro_batch * m_.heads_local();
  if (s_.training.attention == AttentionImpl::flash) {
    // Fused backward: recomputes the scores (hardware FLOPs 2.5x the forward, model FLOPs 2x).
    const int64_t kv_cols = 2 * m_.groups_local() * m_.head_dim;
    BufferId kv = kNoBuffer, dkv = kNoBuffer;
    for (int32_t step = 0; step < m_.cp; ++step) {
      OpSpec o;
      o.kind = OpKind::attention_bwd;
      o.name = m_.cp > 1 ? "ring_attention_bwd" : "flash_attention_bwd";
      o.reads = {b_.whole(a.qkv), b_.whole(a.ctx), b_.whole(a.lse), b_.whole(d_ctx)};
      if (kv != kNoBuffer) o.reads.push_back(b_.whole(kv));
      if (dkv != kNoBuffer) o.reads.push_back(b_.whole(dkv));
      o.writes = {b_.whole(d_qkv)};
      BufferId dkv_out = kNoBuffer;
      if (m_.cp > 1 && step > 0) {  // gradient of the visiting KV block, accumulated as it travels
        dkv_out = act_buffer("dkv_ring", T, kv_cols, DType::f32, MemCategory::buffers);
        o.writes.push_back(b_.whole(dkv_out));
      }
      o.attrs = AttentionAttrs{m_.micro_batch, m_.heads_local(), m_.groups_local(), s, s, m_.head_dim, true,
                               step, static_cast<int32_t>(m_.cp), m_.attention_math()};
      o.flops = 2.5 * attention_flops(m_, s, s);
      o.model_flops = model_part(2.0 * attention_flops(m_, s, s));
      b_.add(std::move(o));
      if (dkv != kNoBuffer) b_.release(dkv);
      if (m_.cp == 1) break;
      // Pass the KV block and its gradient on; after the last step the gradient goes home.
      auto exchange = [&](const char* name, BufferId src, int64_t cols, DType dt) {
        const BufferId dst = act_buffer(name, T, cols, dt, MemCategory::buffers);
        OpSpec x;
        x.kind = OpKind::sendrecv;
        x.stream = Stream::cp_comm;
        x.name = name;
        x.reads = {b_.whole(src)};
        x.writes = {b_.whole(dst)};
        const int64_t bytes = T * cols * bytes_of(dt);
        x.attrs = P2PAttrs{GroupKind::cp, 1, -1, bytes, b_.next_tag(), 1};
        x.bytes = static_cast<double>(bytes);
        b_.add(std::move(x));
        return dst;
      };
      BufferId kv_next = kNoBuffer;
      if (step + 1 < m_.cp) kv_next = exchange("kv_ring_exchange", kv == kNoBuffer ? a.qkv : kv, kv_cols, m_.act);
      if (kv != kNoBuffer) b_.release(kv);
      kv = kv_next;
      if (dkv_out != kNoBuffer) {
        dkv = exchange("dkv_ring_exchange", dkv_out, kv_cols, DType::f32);
        b_.release(dkv_out);
      }
    }
    if (dkv != kNoBuffer) {  // our own block's gradient, back from its trip round the ring
      kernel(OpKind::cast, "dkv_accumulate", {b_.whole(dkv), b_.whole(d_qkv)}, {b_.whole(d_qkv)},
             KernelAttrs{T, kv_cols, 0, 0, 1, 0}, 1);
      b_.release(dkv);
    }
    release_if(a.lse);
    return;
  }
  if (s_.training.recompute == Recompute::selective && a.probs == kNoBuffer) {
    // Megatron checkpoints the whole core attention: its backward reruns QK^T, softmax,
    // dropout and PV (the context itself stays saved as the projection's input).
    const Phase saved = b_.labels.phase;
    b_.labels.phase = Phase::recompute;
    recompute_attention_core(layer, a);
    const BufferId ctx_again = act_buffer("ctx_recomputed", T, m_.attn_cols(), m_.act, MemCategory::buffers);
    OpSpec o;
    o.kind = OpKind::gemm;
    o.name = "attn_pv";
    o.reads = {b_.whole(a.attn_drop != kNoBuffer ? a.attn_drop : a.probs), b_.whole(a.qkv)};
    o.writes = {b_.whole(ctx_again)};
    GemmAttrs g;
    g.m = s;
    g.n = m_.head_dim;
    g.k = s;
    g.batch = bh;
    g.math = m_.attention_math();
    g.role = GemmRole::attn_pv;
    o.attrs = g;
    o.flops = attention_flops(m_, s, s) / 2;
    b_.add(std::move(o));
    b_.release(ctx_again);
    b_.labels.phase = saved;
  }
  auto bgemm = [&](const char* name, GemmRole role, std::vector<TensorRef> reads, TensorRef out, int64_t m,
                   int64_t n, int64_t k, bool ta, bool tb) {
    OpSpec o;
    o.kind = OpKind::gemm;
    o.name = name;
    o.reads = std::move(reads);
    o.writes = {out};
    GemmAttrs g;
    g.m = m;
    g.n = n;
    g.k = k;
    g.batch = bh;
    g.trans_a = ta;
    g.trans_b = tb;
    g.math = m_.attention_math();
    g.role = role;
    o.attrs = g;
    o.flops = 2.0 * static_cast<double>(bh * m) * static_cast<double>(n * k);
    o.model_flops = model_part(o.flops);
    b_.add(std::move(o));
  };
  const BufferId p = a.attn_drop != kNoBuffer ? a.attn_drop : a.probs;
  const BufferId d_s = act_buffer("d_scores", bh * s, s, m_.act, MemCategory::buffers);
  bgemm("attn_dp", GemmRole::attn_dp, {b_.whole(d_ctx), b_.whole(a.qkv)}, b_.whole(d_s), s, s, m_.head_dim, false, true);
  bgemm("attn_dv", GemmRole::attn_dv, {b_.whole(p), b_.whole(d_ctx)}, b_.whole(d_qkv), s, m_.head_dim, s, true, false);
  if (a.attn_mask != kNoBuffer)
    kernel(OpKind::dropout_bwd, "attn_dropout_bwd", {b_.whole(d_s), b_.whole(a.attn_mask)}, {b_.whole(d_s)},
           KernelAttrs{bh * s, s, static_cast<float>(m_.attention_dropout), 0, 1, 0}, 2);
  release_if(a.attn_mask);
  release_if(a.attn_drop);
  const float scale = 1.0f / std::sqrt(static_cast<float>(m_.head_dim));
  kernel(OpKind::softmax_bwd, "scale_mask_softmax_bwd", {b_.whole(d_s), b_.whole(a.probs)}, {b_.whole(d_s)},
         KernelAttrs{bh * s, s, 0, 0, scale, 0}, 4);
  release_if(a.probs);
  bgemm("attn_dq", GemmRole::attn_dq, {b_.whole(d_s), b_.whole(a.qkv)}, b_.whole(d_qkv), s, m_.head_dim, s, false, false);
  bgemm("attn_dk", GemmRole::attn_dk, {b_.whole(d_s), b_.whole(a.qkv), b_.whole(d_qkv)}, b_.whole(d_qkv), s,
        m_.head_dim, s, true, false);
  b_.release(d_s);
}

}  // namespace paralab
