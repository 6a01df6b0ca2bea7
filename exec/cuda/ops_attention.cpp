// paralab exec/cuda — fused attention (attention_fwd / attention_bwd) on the kernels/ flash
// kernels, including the ring steps of context parallelism. The IR keeps Q, K, V in one
// [T, (a/t + 2g/t) d] buffer with rows (position, batch entry); the kernels take
// [batch, heads, seq, d]: the operands are packed on the device, the kernel runs, the results
// are unpacked (exec/cpu/attention.cpp is the reference for every convention below).
//  * Without CP (and at CP step 0) the kernels run in the storage dtype (fp32 compute, one
//    rounding of each output), exactly what the CPU backend's fp32 run + one rounding gives.
//  * CP steps > 0 merge with what earlier steps accumulated: the block runs in fp32 on fp32
//    copies, is merged with the fp32 copy of ctx by log-sum-exp, and ctx is rounded once.
//    A block later in the sequence than this rank's queries is fully masked and skipped; the
//    visiting block's dK/dV travel in fp32 (dkv_ring) until cast "dkv_accumulate" brings them home.
#include <optional>
#include <string>

#include "exec/cuda/cuda_ops.hpp"
#include "ir/error.hpp"
#include "kernels/attention.hpp"

namespace paralab::exec::cuda {

namespace {

using Dims = AttentionDims;
using Block = AttentionBlock;

// Packed operand buffers of one call.
struct Packed {
  Packed(const Dims& x, DType t, cudaStream_t s)
      : es(bytes_of(t)),
        nq(x.b * x.al * x.s * x.d),
        nkv(x.b * x.gl * x.s * x.d),
        q(nq * es, s),
        k(nkv * es, s),
        v(nkv * es, s) {}
  int64_t es, nq, nkv;
  Scratch q, k, v;
};

// Q from qkv; K and V from qkv (own block) or from the received [T, 2 g/t d] kv buffer.
void pack_qkv(const OpCall& call, const Dims& x, bool own, size_t kv_read, DType to, Packed& p, cudaStream_t s) {
  const auto& o = call.plan;
  const DType qt = o.reads[0].dtype;
  dev::pack_heads(call.reads[0], dt(qt), x.qkv_cols, 0, x.d, p.q.get(), dt(to), x.b, x.al, x.s, x.d, s);
  if (own) {
    dev::pack_heads(call.reads[0], dt(qt), x.qkv_cols, x.al * x.d, x.d, p.k.get(), dt(to), x.b, x.gl, x.s, x.d, s);
    dev::pack_heads(call.reads[0], dt(qt), x.qkv_cols, (x.al + x.gl) * x.d, x.d, p.v.get(), dt(to), x.b, x.gl, x.s, x.d, s);
  } else {
    const DType kt = o.reads[kv_read].dtype;
    const int64_t ld = 2 * x.gl * x.d;
    dev::pack_heads(call.reads[kv_read], dt(kt), ld, 0, x.d, p.k.get(), dt(to), x.b, x.gl, x.s, x.d, s);
    dev::pack_heads(call.reads[kv_read], dt(kt), ld, x.gl * x.d, x.d, p.v.get(), dt(to), x.b, x.gl, x.s, x.d, s);
  }
}

void forward(const OpCall& call, CudaOpContext& ctx) {
  const AttentionAttrs& a = *call.op.attention();
  const Dims x = attention_dims(ctx.shape, a);
  const auto& o = call.plan;
  const cudaStream_t s = ctx.stream();
  const Block blk = attention_block(ctx.plan.coord.cp, a);
  if (a.cp_step > 0 && blk == Block::masked) return;  // nothing visible: ctx and lse unchanged
  const bool merge = a.cp_step > 0;
  const DType st = o.writes[0].dtype, work = merge ? DType::f32 : st;
  Packed p(x, work, s);
  pack_qkv(call, x, a.cp_step == 0, 1, work, p, s);
  Scratch out(p.nq * bytes_of(work), s);
  const int64_t nl = x.b * x.al * x.s;
  std::optional<Scratch> lse_blk;
  if (merge) lse_blk.emplace(nl * 4, s);
  auto* lse = static_cast<float*>(call.writes[1]);
  kernels::AttentionFwdArgs f;
  f.q = p.q.get();
  f.k = p.k.get();
  f.v = p.v.get();
  f.out = out.get();
  f.lse = merge ? lse_blk->f() : lse;
  f.batch = x.b;
  f.heads = x.al;
  f.kv_heads = x.gl;
  f.seq = x.s;
  f.head_dim = x.d;
  f.causal = blk == Block::causal;
  f.dtype = kdt(work);
  kernels::flash_attention_fwd_cuda(f, s);
  if (!merge) {
    dev::unpack_heads(out.get(), dt(work), call.writes[0], dt(st), x.ctx_cols, 0, x.d, x.b, x.al, x.s, x.d, false, s);
    return;
  }
  Scratch prev(p.nq * 4, s);
  dev::pack_heads(call.writes[0], dt(st), x.ctx_cols, 0, x.d, prev.get(), dev::T::f32, x.b, x.al, x.s, x.d, s);
  dev::merge_attention(prev.f(), out.f(), lse, lse_blk->f(), nl, x.d, s);
  dev::unpack_heads(prev.get(), dev::T::f32, call.writes[0], dt(st), x.ctx_cols, 0, x.d, x.b, x.al, x.s, x.d, false, s);
}

void backward(const OpCall& call, CudaOpContext& ctx) {
  const AttentionAttrs& a = *call.op.attention();
  const Dims x = attention_dims(ctx.shape, a);
  const auto& o = call.plan;
  const cudaStream_t s = ctx.stream();
  const Block blk = attention_block(ctx.plan.coord.cp, a);
  const int64_t T = x.s * x.b, kv_cols = 2 * x.gl * x.d;
  // reads {qkv, ctx, lse, d_ctx, [kv], [dkv]}; writes {d_qkv, [dkv_out]}
  const bool own = a.cp_step == 0;
  const size_t kv_read = 4, dkv_read = own ? 4 : 5;
  const bool has_dkv_in = call.reads.size() > dkv_read;
  const bool has_dkv_out = call.writes.size() > 1;
  auto* dkv_out = has_dkv_out ? static_cast<float*>(call.writes[1]) : nullptr;
  if (has_dkv_out && o.writes[1].dtype != DType::f32) throw InternalError("attention_bwd: dkv_ring must be fp32");
  if (has_dkv_out) {  // start from the traveling gradient (or zero at the block's first visit)
    const size_t bytes = static_cast<size_t>(T * kv_cols) * 4;
    if (has_dkv_in) PARALAB_CU(cudaMemcpyAsync(dkv_out, call.reads[dkv_read], bytes, cudaMemcpyDeviceToDevice, s));
    else PARALAB_CU(cudaMemsetAsync(dkv_out, 0, bytes, s));
  }
  if (!own && blk == Block::masked) return;  // no gradient flows through a masked block
  const DType st = o.writes[0].dtype, work = own ? st : DType::f32;
  Packed p(x, work, s);
  pack_qkv(call, x, own, kv_read, work, p, s);
  Scratch out(p.nq * bytes_of(work), s), dout(p.nq * bytes_of(work), s), dq(p.nq * bytes_of(work), s);
  Scratch dk(p.nkv * bytes_of(work), s), dv(p.nkv * bytes_of(work), s);
  dev::pack_heads(call.reads[1], dt(o.reads[1].dtype), x.ctx_cols, 0, x.d, out.get(), dt(work), x.b, x.al, x.s, x.d, s);
  dev::pack_heads(call.reads[3], dt(o.reads[3].dtype), x.ctx_cols, 0, x.d, dout.get(), dt(work), x.b, x.al, x.s, x.d, s);
  kernels::AttentionBwdArgs bw;
  bw.q = p.q.get();
  bw.k = p.k.get();
  bw.v = p.v.get();
  bw.out = out.get();
  bw.dout = dout.get();
  bw.lse = static_cast<const float*>(call.reads[2]);
  bw.dq = dq.get();
  bw.dk = dk.get();
  bw.dv = dv.get();
  bw.batch = x.b;
  bw.heads = x.al;
  bw.kv_heads = x.gl;
  bw.seq = x.s;
  bw.head_dim = x.d;
  bw.causal = blk == Block::causal;
  bw.dtype = kdt(work);
  kernels::flash_attention_bwd_cuda(bw, s);
  void* dqkv = call.writes[0];
  dev::unpack_heads(dq.get(), dt(work), dqkv, dt(st), x.qkv_cols, 0, x.d, x.b, x.al, x.s, x.d, !own, s);  // dQ accumulates over ring steps
  if (own) {
    dev::unpack_heads(dk.get(), dt(work), dqkv, dt(st), x.qkv_cols, x.al * x.d, x.d, x.b, x.gl, x.s, x.d, false, s);
    dev::unpack_heads(dv.get(), dt(work), dqkv, dt(st), x.qkv_cols, (x.al + x.gl) * x.d, x.d, x.b, x.gl, x.s, x.d, false, s);
    return;
  }
  if (!has_dkv_out) throw InternalError("attention_bwd: a ring step past 0 needs its dkv_ring output");
  dev::unpack_heads(dk.get(), dev::T::f32, dkv_out, dev::T::f32, kv_cols, 0, x.d, x.b, x.gl, x.s, x.d, true, s);
  dev::unpack_heads(dv.get(), dev::T::f32, dkv_out, dev::T::f32, kv_cols, x.gl * x.d, x.d, x.b, x.gl, x.s, x.d, true, s);
}

}  // namespace

void run_attention(const OpCall& call, CudaOpContext& ctx) {
  if (call.op.kind == OpKind::attention_fwd) forward(call, ctx);
  else backward(call, ctx);
}

}  // namespace paralab::exec::cuda
