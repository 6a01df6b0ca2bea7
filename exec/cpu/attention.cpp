// paralab exec/cpu — fused attention (attention_fwd / attention_bwd) on the CPU reference
// kernels of kernels/attention.hpp, including the ring steps of context parallelism.
//
// The IR keeps Q, K and V inside one [T, (a/t + 2g/t) d] buffer whose rows are (position,
// batch entry); the kernels take [batch, heads, seq, d]. Each call packs the operands to fp32
// in the kernels' layout, runs the kernel and unpacks (rounding once into the storage dtype).
// Context parallelism (docs/ir.md): at ring step i this rank's queries attend to the KV block
// of CP rank src = (cp_idx - i) mod cp. With contiguous sequence chunks, src == cp_idx is the
// causal diagonal block, src < cp_idx a fully visible block and src > cp_idx fully masked (it
// contributes nothing). Blocks merge by their log-sum-exp (online softmax, Dao et al. 2022,
// Sec. 3.1); the backward of a block uses the merged output and log-sum-exp, and the visiting
// block's dK/dV travel with it (dkv_ring) until they are home (cast "dkv_accumulate").
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


// K and V of the block this step attends to: inside qkv (step 0) or the received kv buffer
// ([T, 2 g/t d]: the key groups, then the value groups).
void pack_kv(const OpCall& call, const Dims& x, bool own, size_t kv_read, float* k, float* v) {
  const auto& o = call.plan;
  if (own) {
    pack(call.reads[0], o.reads[0].dtype, x.qkv_cols, x, x.gl, [&](int64_t g) { return (x.al + g) * x.d; }, k);
    pack(call.reads[0], o.reads[0].dtype, x.qkv_cols, x, x.gl, [&](int64_t g) { return (x.al + x.gl + g) * x.d; }, v);
  } else {
    const int64_t ld = 2 * x.gl * x.d;
    pack(call.reads[kv_read], o.reads[kv_read].dtype, ld, x, x.gl, [&](int64_t g) { return g * x.d; }, k);
    pack(call.reads[kv_read], o.reads[kv_read].dtype, ld, x, x.gl, [&](int64_t g) { return (x.gl + g) * x.d; }, v);
  }
}

void forward(const OpCall& call, CpuContext& ctx) {
  const AttentionAttrs& a = *call.op.attention();
  const Dims x = attention_dims(ctx.shape, a);
  const auto& o = call.plan;
  const Block blk = attention_block(ctx.plan.coord.cp, a);
  if (a.cp_step > 0 && blk == Block::masked) return;  // nothing visible: ctx and lse unchanged
  const int64_t nq = x.b * x.al * x.s * x.d, nkv = x.b * x.gl * x.s * x.d, nl = x.b * x.al * x.s;
  float* q = ctx.scratch.get(0, nq);
  float* k = ctx.scratch.get(1, nkv);
  float* v = ctx.scratch.get(2, nkv);
  float* out = ctx.scratch.get(3, nq);
  float* lse_blk = ctx.scratch.get(4, nl);
  pack(call.reads[0], o.reads[0].dtype, x.qkv_cols, x, x.al, [&](int64_t h) { return h * x.d; }, q);
  pack_kv(call, x, a.cp_step == 0, 1, k, v);
  kernels::AttentionFwdArgs f;
  f.q = q;
  f.k = k;
  f.v = v;
  f.out = out;
  f.lse = lse_blk;
  f.batch = x.b;
  f.heads = x.al;
  f.kv_heads = x.gl;
  f.seq = x.s;
  f.head_dim = x.d;
  f.causal = blk == Block::causal;
  f.dtype = kernels::Dtype::f32;
  kernels::attention_fwd_cpu(f);
  const size_t ctx_w = 0, lse_w = 1;
  auto* lse = static_cast<float*>(call.writes[lse_w]);
  const auto head_col = [&](int64_t h) { return h * x.d; };
  if (a.cp_step == 0) {
    unpack(call.writes[ctx_w], o.writes[ctx_w].dtype, x.ctx_cols, x, x.al, head_col, out, false);
    std::copy(lse_blk, lse_blk + nl, lse);
    return;
  }
  // Merge with what the previous steps accumulated: weights exp(lse_i - lse_new).
  float* prev = ctx.scratch.get(5, nq);
  pack(call.writes[ctx_w], o.writes[ctx_w].dtype, x.ctx_cols, x, x.al, head_col, prev);
  for (int64_t r = 0; r < nl; ++r) {
    const float l0 = lse[r], l1 = lse_blk[r];
    const float mx = std::max(l0, l1);
    const float ln = mx + std::log(std::exp(l0 - mx) + std::exp(l1 - mx));
    const float w0 = std::exp(l0 - ln), w1 = std::exp(l1 - ln);
    for (int64_t c = 0; c < x.d; ++c) prev[r * x.d + c] = w0 * prev[r * x.d + c] + w1 * out[r * x.d + c];
    lse[r] = ln;
  }
  unpack(call.writes[ctx_w], o.writes[ctx_w].dtype, x.ctx_cols, x, x.al, head_col, prev, false);
}

void backward(const OpCall& call, CpuContext& ctx) {
  const AttentionAttrs& a = *call.op.attention();
  const Dims x = attention_dims(ctx.shape, a);
  const auto& o = call.plan;
  const Block blk = attention_block(ctx.plan.coord.cp, a);
  const int64_t nq = x.b * x.al * x.s * x.d, nkv = x.b * x.gl * x.s * x.d;
  const int64_t T = x.s * x.b, kv_cols = 2 * x.gl * x.d;
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
  if (!own && blk == Block::masked) return;  // no gradient flows through a masked block
  float* q = ctx.scratch.get(0, nq);
  float* k = ctx.scratch.get(1, nkv);
  float* v = ctx.scratch.get(2, nkv);
  float* out = ctx.scratch.get(3, nq);
  float* dout = ctx.scratch.get(4, nq);
  float* dq = ctx.scratch.get(5, nq);
  float* dk = ctx.scratch.get(6, nkv);
  float* dv = ctx.scratch.get(7, nkv);
  const auto head_col = [&](int64_t h) { return h * x.d; };
  pack(call.reads[0], o.reads[0].dtype, x.qkv_cols, x, x.al, head_col, q);
  pack_kv(call, x, own, kv_read, k, v);
  pack(call.reads[1], o.reads[1].dtype, x.ctx_cols, x, x.al, head_col, out);
  pack(call.reads[3], o.reads[3].dtype, x.ctx_cols, x, x.al, head_col, dout);
  kernels::AttentionBwdArgs bw;
  bw.q = q;
  bw.k = k;
  bw.v = v;
  bw.out = out;
  bw.dout = dout;
  bw.lse = static_cast<const float*>(call.reads[2]);
  bw.dq = dq;
  bw.dk = dk;
  bw.dv = dv;
  bw.batch = x.b;
  bw.heads = x.al;
  bw.kv_heads = x.gl;
  bw.seq = x.s;
  bw.head_dim = x.d;
  bw.causal = blk == Block::causal;
  bw.dtype = kernels::Dtype::f32;
  kernels::attention_bwd_cpu(bw);
  void* dqkv = call.writes[0];
  const DType dt = o.writes[0].dtype;
  unpack(dqkv, dt, x.qkv_cols, x, x.al, head_col, dq, !own);  // dQ accumulates over ring steps
  if (own) {
    unpack(dqkv, dt, x.qkv_cols, x, x.gl, [&](int64_t g) { return (x.al + g) * x.d; }, dk, false);
    unpack(dqkv, dt, x.qkv_cols, x, x.gl, [&](int64_t g) { return (x.al + x.gl + g) * x.d; }, dv, false);
    return;
  }
  if (!has_dkv_out) throw InternalError("attention_bwd: a ring step past 0 needs its dkv_ring output");
  unpack(dkv_out, DType::f32, kv_cols, x, x.gl, [&](int64_t g) { return g * x.d; }, dk, true);
  unpack(dkv_out, DType::f32, kv_cols, x, x.gl, [&](int64_t g) { return (x.gl + g) * x.d; }, dv, true);
}

}  // namespace

void run_attention(const OpCall& call, CpuContext& ctx) {
  if (call.op.kind == OpKind::attention_fwd) forward(call, ctx);
  else backward(call, ctx);
}

}  // namespace paralab::exec::cpu
