// paralab exec/cpu — fused attention (attention_fwd / attention_bwd) on the CPU reference
// kernels of kernels/attention.hpp, including the ring steps of context parallelism.
//
// The IR keeps Q, K and V inside one [T, (a/t + 2g/t) d] buffer whose rows are (position,
// batch entry); the kernels take [batch, heads, seq, d]. Each call packs the operands to fp32
// in the kernels' layout, runs the kernel and unpacks (rounding once into the storage dtype).
// Context parallelism (docs/executor.md, "Context parallelism"): at ring step i this rank's
// queries attend to the KV of CP rank src = (cp_idx - i) mod cp. With Megatron-LM's load-balanced
// split (exec/plan.hpp CpSplit) each rank holds two sequence chunks, so a step is 2 x 2 pairs of
// (query chunk, KV chunk), each the causal diagonal, fully visible or masked; every rank does
// the same work at every step. Blocks merge by their log-sum-exp (online softmax, Dao et al.
// 2022, Sec. 3.1); the backward of a block uses the merged output and log-sum-exp, and the
// visiting block's dK/dV travel with it (dkv_ring) until they are home (cast "dkv_accumulate").
#include <cmath>
#include <limits>

#include "exec/cpu/cpu_math.hpp"
#include "exec/plan.hpp"
#include "ir/error.hpp"
#include "kernels/attention.hpp"

namespace paralab::exec::cpu {

namespace {

using Dims = AttentionDims;
using Block = AttentionBlock;

// [b, H, s, d] fp32 <-> heads stored at columns col(h) .. col(h)+d of rows i*b + b_idx.
template <class ColOf>
void pack(const void* base, DType t, int64_t ld, const Dims& x, int64_t H, ColOf col, float* out) {
  for (int64_t bi = 0; bi < x.b; ++bi)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < x.s; ++i)
        load_f32(static_cast<const char*>(base) + ((i * x.b + bi) * ld + col(h)) * bytes_of(t), t, x.d,
                 out + ((bi * H + h) * x.s + i) * x.d);
}

template <class ColOf>
void unpack(void* base, DType t, int64_t ld, const Dims& x, int64_t H, ColOf col, const float* in, bool add) {
  for (int64_t bi = 0; bi < x.b; ++bi)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < x.s; ++i) {
        char* dst = static_cast<char*>(base) + ((i * x.b + bi) * ld + col(h)) * bytes_of(t);
        const float* src = in + ((bi * H + h) * x.s + i) * x.d;
        if (add) add_into(dst, t, x.d, src, true);
        else store_f32(dst, t, x.d, src);
      }
}


// Context parallelism works on halves of the local sequence (CpSplit: chunk i and 2cp-1-i of
// CP rank i); without it the whole sequence is one "half" with the causal mask. Half h is the
// contiguous row range [h c b, (h+1) c b) of every [T, cols] tensor (rows are (position,
// batch entry)), so a packed half is a Dims with s = c over rows offset by h c b.
struct Halves {
  Dims x;            // the geometry of one half (s = c)
  RingBlocks ring;   // the mask of every (query half, KV half) pair at this step
  [[nodiscard]] int n() const { return ring.halves; }  // 2 under CP, else 1
  [[nodiscard]] const void* at(const void* base, DType t, int64_t ld, int h) const {
    return static_cast<const char*>(base) + h * x.s * x.b * ld * bytes_of(t);
  }
  [[nodiscard]] void* at(void* base, DType t, int64_t ld, int h) const {
    return static_cast<char*>(base) + h * x.s * x.b * ld * bytes_of(t);
  }
};

Halves halves_of(const CpuContext& ctx, const AttentionAttrs& a, const Dims& full) {
  Halves h;
  h.ring = ring_blocks(cp_split(ctx.shape, ctx.plan.coord.cp), a);
  h.x = full;
  h.x.s = full.s / h.n();
  return h;
}

// [b, H, s] fp32 log-sum-exp <-> its half hq ([b, H, c]).
void lse_half(const float* from, float* to, const Halves& hv, int hq, bool gather) {
  const int64_t c = hv.x.s, s = c * hv.n();
  for (int64_t r = 0; r < hv.x.b * hv.x.al; ++r) {
    if (gather) std::copy(from + r * s + hq * c, from + r * s + (hq + 1) * c, to + r * c);
    else std::copy(from + r * c, from + (r + 1) * c, to + r * s + hq * c);
  }
}

// K and V of KV half hk of the block this step attends to: inside qkv (step 0) or the
// received kv buffer ([T, 2 g/t d]: the key groups, then the value groups).
void pack_kv(const OpCall& call, const Halves& hv, int hk, bool own, size_t kv_read, float* k, float* v) {
  const auto& o = call.plan;
  const Dims& x = hv.x;
  if (own) {
    const DType t = o.reads[0].dtype;
    const void* base = hv.at(call.reads[0], t, x.qkv_cols, hk);
    pack(base, t, x.qkv_cols, x, x.gl, [&](int64_t g) { return (x.al + g) * x.d; }, k);
    pack(base, t, x.qkv_cols, x, x.gl, [&](int64_t g) { return (x.al + x.gl + g) * x.d; }, v);
  } else {
    const DType t = o.reads[kv_read].dtype;
    const int64_t ld = 2 * x.gl * x.d;
    const void* base = hv.at(call.reads[kv_read], t, ld, hk);
    pack(base, t, ld, x, x.gl, [&](int64_t g) { return g * x.d; }, k);
    pack(base, t, ld, x, x.gl, [&](int64_t g) { return (x.gl + g) * x.d; }, v);
  }
}

// Online-softmax merge of a block's (out, lse) into the accumulated (acc, acc_lse): weights
// exp(lse_i - lse_new) (Dao et al. 2022, Sec. 3.1). rows x d.
void merge(float* acc, float* acc_lse, const float* out, const float* lse, int64_t rows, int64_t d) {
  for (int64_t r = 0; r < rows; ++r) {
    const float l0 = acc_lse[r], l1 = lse[r];
    const float mx = std::max(l0, l1);
    const float ln = mx + std::log(std::exp(l0 - mx) + std::exp(l1 - mx));
    const float w0 = std::exp(l0 - ln), w1 = std::exp(l1 - ln);
    for (int64_t c = 0; c < d; ++c) acc[r * d + c] = w0 * acc[r * d + c] + w1 * out[r * d + c];
    acc_lse[r] = ln;
  }
}

void forward(const OpCall& call, CpuContext& ctx) {
  const AttentionAttrs& a = *call.op.attention();
  const Halves hv = halves_of(ctx, a, attention_dims(ctx.shape, a));
  const Dims& x = hv.x;
  const auto& o = call.plan;
  const bool own = a.cp_step == 0;
  const int64_t nq = x.b * x.al * x.s * x.d, nkv = x.b * x.gl * x.s * x.d, nl = x.b * x.al * x.s;
  float* k[2] = {ctx.scratch.get(1, nkv), ctx.scratch.get(2, nkv)};
  float* v[2] = {ctx.scratch.get(3, nkv), ctx.scratch.get(4, nkv)};
  float* q = ctx.scratch.get(0, nq);
  float* out = ctx.scratch.get(5, nq);
  float* lse_blk = ctx.scratch.get(6, nl);
  float* acc = ctx.scratch.get(7, nq);
  float* acc_lse = ctx.scratch.get(8, nl);
  for (int hk = 0; hk < hv.n(); ++hk) pack_kv(call, hv, hk, own, 1, k[hk], v[hk]);
  const size_t ctx_w = 0, lse_w = 1;
  const DType qt = o.reads[0].dtype, ct = o.writes[ctx_w].dtype;
  auto* lse = static_cast<float*>(call.writes[lse_w]);
  const auto head_col = [&](int64_t h) { return h * x.d; };
  for (int hq = 0; hq < hv.n(); ++hq) {
    if (!hv.ring.q_used(hq)) continue;  // nothing visible: this half's ctx and lse unchanged
    pack(hv.at(call.reads[0], qt, x.qkv_cols, hq), qt, x.qkv_cols, x, x.al, head_col, q);
    bool have = !own;  // past step 0, ctx and lse hold the earlier steps' merge
    if (have) {
      pack(hv.at(call.writes[ctx_w], ct, x.ctx_cols, hq), ct, x.ctx_cols, x, x.al, head_col, acc);
      lse_half(lse, acc_lse, hv, hq, true);
    }
    for (int hk = 0; hk < hv.n(); ++hk) {
      const Block blk = hv.ring.blk[hq][hk];
      if (blk == Block::masked) continue;
      kernels::AttentionFwdArgs f;
      set_attention_call(f, q, k[hk], v[hk], x, x.s, blk == Block::causal);
      f.out = have ? out : acc;  // the first visible block is written in place
      f.lse = have ? lse_blk : acc_lse;
      f.dtype = kernels::Dtype::f32;
      kernels::attention_fwd_cpu(f);
      if (have) merge(acc, acc_lse, out, lse_blk, nl, x.d);
      have = true;
    }
    unpack(hv.at(call.writes[ctx_w], ct, x.ctx_cols, hq), ct, x.ctx_cols, x, x.al, head_col, acc, false);
    lse_half(acc_lse, lse, hv, hq, false);
  }
}

void backward(const OpCall& call, CpuContext& ctx) {
  const AttentionAttrs& a = *call.op.attention();
  const Halves hv = halves_of(ctx, a, attention_dims(ctx.shape, a));
  const Dims& x = hv.x;
  const auto& o = call.plan;
  const int64_t nq = x.b * x.al * x.s * x.d, nkv = x.b * x.gl * x.s * x.d, nl = x.b * x.al * x.s;
  const int64_t T = x.s * hv.n() * x.b, kv_cols = 2 * x.gl * x.d;
  // reads {qkv, ctx, lse, d_ctx, [kv], [dkv]}; writes {d_qkv, [dkv_out]}
  const bool own = a.cp_step == 0;
  const size_t kv_read = 4, dkv_read = own ? 4 : 5;
  const bool has_dkv_in = call.reads.size() > dkv_read;
  const bool has_dkv_out = call.writes.size() > 1;
  float* dkv_out = has_dkv_out ? static_cast<float*>(call.writes[1]) : nullptr;
  if (has_dkv_out && o.writes[1].dtype != DType::f32) throw InternalError("attention_bwd: dkv_ring must be fp32");
  if (has_dkv_out) {  // start from the traveling gradient (or zero at the block's first visit)
    if (has_dkv_in) std::copy(static_cast<const float*>(call.reads[dkv_read]),
                              static_cast<const float*>(call.reads[dkv_read]) + T * kv_cols, dkv_out);
    else std::fill(dkv_out, dkv_out + T * kv_cols, 0.0f);
  }
  if (!own && !has_dkv_out) throw InternalError("attention_bwd: a ring step past 0 needs its dkv_ring output");
  float* k[2] = {ctx.scratch.get(1, nkv), ctx.scratch.get(2, nkv)};
  float* v[2] = {ctx.scratch.get(3, nkv), ctx.scratch.get(4, nkv)};
  float* dk[2] = {ctx.scratch.get(10, nkv), ctx.scratch.get(11, nkv)};
  float* dv[2] = {ctx.scratch.get(12, nkv), ctx.scratch.get(13, nkv)};
  float* q = ctx.scratch.get(0, nq);
  float* out = ctx.scratch.get(5, nq);
  float* dout = ctx.scratch.get(6, nq);
  float* lse = ctx.scratch.get(7, nl);
  float* dq = ctx.scratch.get(8, nq);
  float* dq_t = ctx.scratch.get(9, nq);
  float* dk_t = ctx.scratch.get(14, nkv);
  float* dv_t = ctx.scratch.get(15, nkv);
  bool kv_have[2] = {false, false};
  for (int hk = 0; hk < hv.n(); ++hk) pack_kv(call, hv, hk, own, kv_read, k[hk], v[hk]);
  const auto head_col = [&](int64_t h) { return h * x.d; };
  const auto add = [](float* to, const float* from, int64_t n) {
    for (int64_t i = 0; i < n; ++i) to[i] += from[i];
  };
  void* dqkv = call.writes[0];
  const DType dt = o.writes[0].dtype, qt = o.reads[0].dtype;
  for (int hq = 0; hq < hv.n(); ++hq) {
    if (!hv.ring.q_used(hq)) continue;  // no gradient flows through masked blocks
    pack(hv.at(call.reads[0], qt, x.qkv_cols, hq), qt, x.qkv_cols, x, x.al, head_col, q);
    pack(hv.at(call.reads[1], o.reads[1].dtype, x.ctx_cols, hq), o.reads[1].dtype, x.ctx_cols, x, x.al, head_col, out);
    pack(hv.at(call.reads[3], o.reads[3].dtype, x.ctx_cols, hq), o.reads[3].dtype, x.ctx_cols, x, x.al, head_col, dout);
    lse_half(static_cast<const float*>(call.reads[2]), lse, hv, hq, true);
    bool q_have = false;
    for (int hk = 0; hk < hv.n(); ++hk) {
      const Block blk = hv.ring.blk[hq][hk];
      if (blk == Block::masked) continue;
      // The backward of a block uses the merged output and log-sum-exp (FlashAttention-2 Alg. 2).
      kernels::AttentionBwdArgs bw;
      set_attention_call(bw, q, k[hk], v[hk], x, x.s, blk == Block::causal);
      bw.out = out;
      bw.dout = dout;
      bw.lse = lse;
      bw.dq = q_have ? dq_t : dq;  // first contributions in place, later ones added
      bw.dk = kv_have[hk] ? dk_t : dk[hk];
      bw.dv = kv_have[hk] ? dv_t : dv[hk];
      bw.dtype = kernels::Dtype::f32;
      kernels::attention_bwd_cpu(bw);
      if (q_have) add(dq, dq_t, nq);
      if (kv_have[hk]) {
        add(dk[hk], dk_t, nkv);
        add(dv[hk], dv_t, nkv);
      }
      q_have = kv_have[hk] = true;
    }
    unpack(hv.at(dqkv, dt, x.qkv_cols, hq), dt, x.qkv_cols, x, x.al, head_col, dq, !own);  // dQ accumulates over ring steps
  }
  for (int hk = 0; hk < hv.n(); ++hk) {
    if (!kv_have[hk]) {
      if (own) throw InternalError("attention_bwd: a KV half of the own block saw no query");
      continue;
    }
    if (own) {
      void* base = hv.at(dqkv, dt, x.qkv_cols, hk);
      unpack(base, dt, x.qkv_cols, x, x.gl, [&](int64_t g) { return (x.al + g) * x.d; }, dk[hk], false);
      unpack(base, dt, x.qkv_cols, x, x.gl, [&](int64_t g) { return (x.al + x.gl + g) * x.d; }, dv[hk], false);
    } else {
      void* base = hv.at(dkv_out, DType::f32, kv_cols, hk);
      unpack(base, DType::f32, kv_cols, x, x.gl, [&](int64_t g) { return g * x.d; }, dk[hk], true);
      unpack(base, DType::f32, kv_cols, x, x.gl, [&](int64_t g) { return (x.gl + g) * x.d; }, dv[hk], true);
    }
  }
}

}  // namespace

void run_attention(const OpCall& call, CpuContext& ctx) {
  if (call.op.kind == OpKind::attention_fwd) forward(call, ctx);
  else backward(call, ctx);
}

}  // namespace paralab::exec::cpu
