// paralab exec/cuda — fused attention (attention_fwd / attention_bwd) on the kernels/ flash
// kernels, including the ring steps of context parallelism. The IR keeps Q, K, V in one
// [T, (a/t + 2g/t) d] buffer with rows (position, batch entry); the kernels take
// [batch, heads, seq, d]: the operands are packed on the device, the kernel runs, the results
// are unpacked (exec/cpu/attention.cpp is the reference for every convention below).
//  * Without CP: one causal call over the local sequence in the storage dtype (fp32 compute,
//    one rounding of each output), exactly what the CPU backend's fp32 run + one rounding gives.
//  * With CP the local sequence is two chunks of c = S / (2 cp) positions (Megatron-LM's
//    load-balanced split, get_batch_on_this_cp_rank; CpSplit): half h is the row range
//    [h c b, (h+1) c b). Ring attention (Liu et al. 2023): at ring step j this rank holds the KV
//    of CP rank (cp_idx - j) mod cp, and each (query half, KV half) pair is a c x c block that
//    is causal (same chunk), fully visible (earlier chunk) or masked (skipped) — attention_block.
//    All CP work is fp32: a query half's visible blocks merge by log-sum-exp (online softmax,
//    Dao et al. 2022, Sec. 3.1) with what earlier steps left in ctx/lse, and ctx is rounded
//    once per op. The backward of a block uses the merged out/lse; dQ sums per query half and
//    dK/dV per KV half in fp32. Step 0 overwrites d_qkv with them (every half is visited there);
//    later steps add dQ into d_qkv and dK/dV into the visiting KV's fp32 dkv_ring, which travels
//    until cast "dkv_accumulate" brings it home.
#include <optional>
#include <string>

#include "exec/cuda/cuda_ops.hpp"
#include "exec/kernel_args.hpp"
#include "ir/error.hpp"
#include "kernels/attention.hpp"

namespace paralab::exec::cuda {

namespace {

using Dims = AttentionDims;
using Block = AttentionBlock;
using Buf = std::optional<Scratch>;

// `heads` heads of d columns from column col0 of a [T, ld] matrix with rows (position, batch
// entry), stored in dtype t.
struct Cols {
  void* p;
  DType t;
  int64_t ld, col0, heads;
};

// Rows [h n b, (h+1) n b) of `c` (sequence half h of n positions) <-> packed [b, heads, n, d].
void pack(const Cols& c, const Dims& x, int h, int64_t n, void* dst, DType to, cudaStream_t s) {
  const char* rows = static_cast<const char*>(c.p) + h * n * x.b * c.ld * bytes_of(c.t);
  dev::pack_heads(rows, dt(c.t), c.ld, c.col0, x.d, dst, dt(to), x.b, c.heads, n, x.d, s);
}
void unpack(const void* src, DType from, const Cols& c, const Dims& x, int h, int64_t n, bool add, cudaStream_t s) {
  char* rows = static_cast<char*>(c.p) + h * n * x.b * c.ld * bytes_of(c.t);
  dev::unpack_heads(src, dt(from), rows, dt(c.t), c.ld, c.col0, x.d, x.b, c.heads, n, x.d, add, s);
}

// The log-sum-exp is fp32 [b, a/t, s]: half h is n floats at offset h n of each of its b a/t
// rows. gather: lse half -> contiguous [b, a/t, n] `half`; else the reverse.
void lse_half(void* lse, float* half, const Dims& x, int h, int64_t n, bool gather, cudaStream_t s) {
  float* strided = static_cast<float*>(lse) + h * n;
  const auto pitch = static_cast<size_t>(x.s) * 4, width = static_cast<size_t>(n) * 4;
  const auto rows = static_cast<size_t>(x.b * x.al);
  if (gather) PARALAB_CU(cudaMemcpy2DAsync(half, width, strided, pitch, width, rows, cudaMemcpyDeviceToDevice, s));
  else PARALAB_CU(cudaMemcpy2DAsync(strided, pitch, half, width, width, rows, cudaMemcpyDeviceToDevice, s));
}

// Q from qkv; K and V from qkv (own KV, step 0) or from the received [T, 2 g/t d] kv buffer
// (the key groups, then the value groups).
struct Operands {
  Cols q, k, v;
};
Operands operands(const OpCall& call, const Dims& x, bool own, size_t kv_read) {
  const auto& o = call.plan;
  const Cols q{call.reads[0], o.reads[0].dtype, x.qkv_cols, 0, x.al};
  if (own)
    return {q, {q.p, q.t, x.qkv_cols, x.al * x.d, x.gl}, {q.p, q.t, x.qkv_cols, (x.al + x.gl) * x.d, x.gl}};
  const Cols k{call.reads[kv_read], o.reads[kv_read].dtype, 2 * x.gl * x.d, 0, x.gl};
  return {q, k, {k.p, k.t, k.ld, x.gl * x.d, x.gl}};
}

// Packs half h of `c` into a fresh scratch (`elems` elements of `to`).
void pack_half(Buf& b, const Cols& c, const Dims& x, int h, int64_t n, int64_t elems, DType to, cudaStream_t s) {
  b.emplace(elems * bytes_of(to), s);
  pack(c, x, h, n, b->get(), to, s);
}

void forward(const OpCall& call, CudaOpContext& ctx) {
  const AttentionAttrs& a = *call.op.attention();
  const Dims x = attention_dims(ctx.shape, a);
  const CpSplit sp = cp_split(ctx.shape, ctx.plan.coord.cp);
  const RingBlocks r = ring_blocks(sp, a);
  const cudaStream_t s = ctx.stream();
  const int64_t n = sp.chunk, nq = x.b * x.al * n * x.d, nkv = x.b * x.gl * n * x.d, nl = x.b * x.al * n;
  const DType st = call.plan.writes[0].dtype, work = r.halves > 1 ? DType::f32 : st;
  const Operands in = operands(call, x, a.cp_step == 0, 1);
  const Cols out_c{call.writes[0], st, x.ctx_cols, 0, x.al};
  Buf k[2], v[2];
  for (int hk = 0; hk < r.halves; ++hk)
    if (r.kv_used(hk)) {
      pack_half(k[hk], in.k, x, hk, n, nkv, work, s);
      pack_half(v[hk], in.v, x, hk, n, nkv, work, s);
    }
  for (int hq = 0; hq < r.halves; ++hq) {
    if (!r.q_used(hq)) continue;  // nothing visible at this step: the half's ctx and lse unchanged
    Buf q, blk_out, blk_lse, lse_buf;
    pack_half(q, in.q, x, hq, n, nq, work, s);
    // The running (ctx, lse) of this query half: fp32 under CP; the lse is written in place
    // when the half is the whole sequence (no CP), else gathered from its strided slice.
    Scratch acc(nq * bytes_of(work), s);
    float* acc_lse = static_cast<float*>(call.writes[1]);
    if (r.halves > 1) acc_lse = lse_buf.emplace(nl * 4, s).f();
    bool have = a.cp_step > 0;  // later steps merge with what earlier steps accumulated
    if (have) {
      pack(out_c, x, hq, n, acc.get(), work, s);
      lse_half(call.writes[1], acc_lse, x, hq, n, true, s);
    }
    for (int hk = 0; hk < r.halves; ++hk) {
      if (!r.visible(hq, hk)) continue;
      if (have && !blk_out) {
        blk_out.emplace(nq * bytes_of(work), s);
        blk_lse.emplace(nl * 4, s);
      }
      kernels::AttentionFwdArgs f;
      set_attention_call(f, q->get(), k[hk]->get(), v[hk]->get(), x, n, r.blk[hq][hk] == Block::causal);
      f.out = have ? blk_out->get() : acc.get();  // the first block of step 0 is copied, not merged
      f.lse = have ? blk_lse->f() : acc_lse;
      f.dtype = args::kernel_dtype(work);
      kernels::flash_attention_fwd_cuda(f, s);
      if (have) dev::merge_attention(acc.f(), blk_out->f(), acc_lse, blk_lse->f(), nl, x.d, s);
      have = true;
    }
    unpack(acc.get(), work, out_c, x, hq, n, false, s);  // the one rounding of ctx
    if (r.halves > 1) lse_half(call.writes[1], acc_lse, x, hq, n, false, s);
  }
}

// A gradient summed over the blocks that touch one sequence half: the first block's kernel
// writes the sum itself, later ones a temporary that commit() adds (fp32: only CP has several).
class GradSum {
 public:
  GradSum(int64_t elems, DType t, cudaStream_t s) : n_(elems), t_(t), s_(s) {}
  void* next() {
    pending_ = sum_.has_value();
    Buf& b = pending_ ? tmp_ : sum_;
    if (!b) b.emplace(n_ * bytes_of(t_), s_);
    return b->get();
  }
  void commit() {
    if (pending_) dev::copy2d(tmp_->get(), dt(t_), n_, sum_->get(), dt(t_), n_, 1, n_, true, s_);
    pending_ = false;
  }
  [[nodiscard]] bool seen() const { return sum_.has_value(); }
  [[nodiscard]] const void* get() const { return sum_->get(); }

 private:
  int64_t n_;
  DType t_;
  cudaStream_t s_;
  Buf sum_, tmp_;
  bool pending_ = false;
};

void backward(const OpCall& call, CudaOpContext& ctx) {
  const AttentionAttrs& a = *call.op.attention();
  const Dims x = attention_dims(ctx.shape, a);
  const auto& o = call.plan;
  const cudaStream_t s = ctx.stream();
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
  const CpSplit sp = cp_split(ctx.shape, ctx.plan.coord.cp);
  const RingBlocks r = ring_blocks(sp, a);
  if (!own && !r.kv_used(0) && !r.kv_used(1)) return;  // no gradient flows through masked blocks
  if (!own && !has_dkv_out) throw InternalError("attention_bwd: a ring step past 0 needs its dkv_ring output");
  const int64_t n = sp.chunk, nq = x.b * x.al * n * x.d, nkv = x.b * x.gl * n * x.d, nl = x.b * x.al * n;
  const DType st = o.writes[0].dtype, work = r.halves > 1 ? DType::f32 : st;
  const Operands in = operands(call, x, own, kv_read);
  const Cols out_c{call.reads[1], o.reads[1].dtype, x.ctx_cols, 0, x.al};
  const Cols dout_c{call.reads[3], o.reads[3].dtype, x.ctx_cols, 0, x.al};
  Buf q[2], out[2], dout[2], lse[2], k[2], v[2];
  for (int h = 0; h < r.halves; ++h) {
    if (r.q_used(h)) {  // the query half with the merged (global) output and lse of the forward
      pack_half(q[h], in.q, x, h, n, nq, work, s);
      pack_half(out[h], out_c, x, h, n, nq, work, s);
      pack_half(dout[h], dout_c, x, h, n, nq, work, s);
      if (r.halves > 1) lse_half(call.reads[2], lse[h].emplace(nl * 4, s).f(), x, h, n, true, s);
    }
    if (r.kv_used(h)) {
      pack_half(k[h], in.k, x, h, n, nkv, work, s);
      pack_half(v[h], in.v, x, h, n, nkv, work, s);
    }
  }
  GradSum dq[2]{{nq, work, s}, {nq, work, s}}, dk[2]{{nkv, work, s}, {nkv, work, s}},
      dv[2]{{nkv, work, s}, {nkv, work, s}};
  for (int hq = 0; hq < r.halves; ++hq)
    for (int hk = 0; hk < r.halves; ++hk) {
      if (!r.visible(hq, hk)) continue;
      kernels::AttentionBwdArgs bw;
      bw.out = out[hq]->get();
      bw.dout = dout[hq]->get();
      bw.lse = r.halves > 1 ? lse[hq]->f() : static_cast<const float*>(call.reads[2]);
      bw.dq = dq[hq].next();
      bw.dk = dk[hk].next();
      bw.dv = dv[hk].next();
      set_attention_call(bw, q[hq]->get(), k[hk]->get(), v[hk]->get(), x, n, r.blk[hq][hk] == Block::causal);
      bw.dtype = args::kernel_dtype(work);
      kernels::flash_attention_bwd_cuda(bw, s);
      dq[hq].commit();
      dk[hk].commit();
      dv[hk].commit();
    }
  // Step 0 owns every column of d_qkv (overwritten, one rounding); later steps add dQ into it
  // and dK/dV into the traveling fp32 dkv_ring ([T, 2 g/t d]: key groups, then value groups).
  const Cols dq_c{call.writes[0], st, x.qkv_cols, 0, x.al};
  const Cols dk_c = own ? Cols{dq_c.p, st, x.qkv_cols, x.al * x.d, x.gl} : Cols{dkv_out, DType::f32, kv_cols, 0, x.gl};
  const Cols dv_c = own ? Cols{dq_c.p, st, x.qkv_cols, (x.al + x.gl) * x.d, x.gl}
                        : Cols{dkv_out, DType::f32, kv_cols, x.gl * x.d, x.gl};
  for (int h = 0; h < r.halves; ++h) {
    if (own && !(dq[h].seen() && dk[h].seen()))
      throw InternalError("attention_bwd: ring step 0 does not visit sequence half " + std::to_string(h));
    if (dq[h].seen()) unpack(dq[h].get(), work, dq_c, x, h, n, !own, s);
    if (dk[h].seen()) {
      unpack(dk[h].get(), work, dk_c, x, h, n, !own, s);
      unpack(dv[h].get(), work, dv_c, x, h, n, !own, s);
    }
  }
}

}  // namespace

void run_attention(const OpCall& call, CudaOpContext& ctx) {
  if (call.op.kind == OpKind::attention_fwd) forward(call, ctx);
  else backward(call, ctx);
}

}  // namespace paralab::exec::cuda
