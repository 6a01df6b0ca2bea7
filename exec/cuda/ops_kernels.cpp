// paralab exec/cuda — the memory-bound ops of docs/ir.md on the kernels/ CUDA launchers, with
// the IR's conventions exactly as the CPU backend applies them (exec/cpu/kernel_ops.cpp is the
// reference): [rows, 2] statistics, gradient outputs that accumulate in fp32 (into an fp32
// scratch added to non-fp32 views), residual-gradient accumulation, dropout seeds and sequence-
// parallel offsets, RoPE on the Q/K columns of qkv, vocab-parallel embedding with learned
// positions on tensor rank 0, the IR's cross-entropy stages, and the optimizer step whose loss
// scale, overflow flag and clipping coefficient stay on the device (no host synchronization).
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "exec/cpu/cpu_math.hpp"  // cpu::dropout_seed: the same seeds as the CPU backend
#include "exec/cuda/cuda_ops.hpp"
#include "ir/error.hpp"
#include "kernels/adamw.hpp"
#include "kernels/cast.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/dropout.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gelu.hpp"
#include "kernels/l2norm.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/loss_scale.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/sgd.hpp"
#include "kernels/softmax.hpp"
#include "kernels/swiglu.hpp"

namespace paralab::exec::cuda {

namespace {

void expect(const OpCall& call, bool read, size_t i, int64_t numel, const char* what) {
  const auto& refs = read ? call.plan.reads : call.plan.writes;
  if (i >= refs.size())
    throw InternalError("op " + op_label(call.op) + ": missing " + (read ? "read " : "write ") + std::to_string(i) + " (" +
                        what + ")");
  if (refs[i].numel != numel)
    throw InternalError("op " + op_label(call.op) + ": " + what + " has " + std::to_string(refs[i].numel) +
                        " elements, expected " + std::to_string(numel));
}

// A gradient output the kernels write in fp32: the view itself when fp32, else a zeroed fp32
// scratch that commit() adds into the view (one rounding), as the CPU backend's F32Grad.
class F32Grad {
 public:
  F32Grad(void* p, const ResolvedRef& r, cudaStream_t s) : p_(p), r_(r), s_(s) {
    if (r_.dtype != DType::f32) {
      scratch_.emplace(r_.numel * 4, s_);
      PARALAB_CU(cudaMemsetAsync(scratch_->get(), 0, static_cast<size_t>(r_.numel) * 4, s_));
    }
  }
  [[nodiscard]] float* ptr() const { return scratch_ ? scratch_->f() : static_cast<float*>(p_); }
  [[nodiscard]] bool kernel_accumulates() const { return !scratch_; }
  void commit() const {
    if (scratch_) dev::copy2d(scratch_->get(), dev::T::f32, r_.numel, p_, dt(r_.dtype), r_.numel, 1, r_.numel, true, s_);
  }

 private:
  void* p_;
  const ResolvedRef& r_;
  cudaStream_t s_;
  std::optional<Scratch> scratch_;
};

int64_t tp_index(const CudaOpContext& c) { return c.plan.coord.tp; }

void norm_fwd(const OpCall& call, CudaOpContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const auto& o = call.plan;
  const cudaStream_t s = ctx.stream();
  expect(call, true, 0, k.rows * k.cols, "x");
  expect(call, false, 1, k.rows * 2, "stats");
  Scratch a(k.rows * 4, s), b(k.rows * 4, s);
  if (call.op.kind == OpKind::layernorm_fwd) {
    kernels::LayerNormFwdArgs x;
    x.x = call.reads[0];
    x.gamma = call.reads[1];
    x.beta = call.reads.size() > 2 ? call.reads[2] : nullptr;
    x.y = call.writes[0];
    x.mean = a.f();
    x.rstd = b.f();
    x.rows = k.rows;
    x.cols = k.cols;
    x.eps = k.eps;
    x.dtype = kdt(o.reads[0].dtype);
    kernels::layernorm_fwd_cuda(x, s);
  } else {
    kernels::RmsNormFwdArgs x;
    x.x = call.reads[0];
    x.gamma = call.reads[1];
    x.y = call.writes[0];
    x.rrms = b.f();
    x.rows = k.rows;
    x.cols = k.cols;
    x.eps = k.eps;
    x.dtype = kdt(o.reads[0].dtype);
    kernels::rmsnorm_fwd_cuda(x, s);
    PARALAB_CU(cudaMemsetAsync(a.get(), 0, static_cast<size_t>(k.rows) * 4, s));
  }
  // stats [rows, 2] = (mean, rstd) or (0, rrms)
  auto* stats = static_cast<float*>(call.writes[1]);
  dev::copy2d(a.get(), dev::T::f32, 1, stats, dev::T::f32, 2, k.rows, 1, false, s);
  dev::copy2d(b.get(), dev::T::f32, 1, stats + 1, dev::T::f32, 2, k.rows, 1, false, s);
}

// reads {dy, x, stats, gamma, [residual grad]}, writes {residual grad, dgamma, [dbeta]}.
void norm_bwd(const OpCall& call, CudaOpContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const auto& o = call.plan;
  const cudaStream_t s = ctx.stream();
  const int64_t n = k.rows * k.cols;
  expect(call, true, 0, n, "dy");
  expect(call, true, 2, k.rows * 2, "stats");
  const DType dtp = o.reads[0].dtype;
  Scratch a(k.rows * 4, s), b(k.rows * 4, s);
  const auto* stats = static_cast<const float*>(call.reads[2]);
  dev::copy2d(stats, dev::T::f32, 2, a.get(), dev::T::f32, 1, k.rows, 1, false, s);
  dev::copy2d(stats + 1, dev::T::f32, 2, b.get(), dev::T::f32, 1, k.rows, 1, false, s);
  const bool add = k.aux == 1;  // dx is added into the residual gradient
  std::optional<Scratch> dx_buf;
  if (add) dx_buf.emplace(n * bytes_of(dtp), s);
  void* dx = add ? dx_buf->get() : call.writes[0];
  const F32Grad dgamma(call.writes[1], o.writes[1], s);
  if (call.op.kind == OpKind::layernorm_bwd) {
    std::optional<F32Grad> dbeta;
    if (call.writes.size() > 2) dbeta.emplace(call.writes[2], o.writes[2], s);
    kernels::LayerNormBwdArgs x;
    x.dy = call.reads[0];
    x.x = call.reads[1];
    x.gamma = call.reads[3];
    x.mean = a.f();
    x.rstd = b.f();
    x.dx = dx;
    x.dgamma = dgamma.ptr();
    x.dbeta = dbeta ? dbeta->ptr() : nullptr;
    x.accumulate = dgamma.kernel_accumulates();
    x.rows = k.rows;
    x.cols = k.cols;
    x.dtype = kdt(dtp);
    if (dbeta && dbeta->kernel_accumulates() != dgamma.kernel_accumulates())
      throw InternalError("op " + op_label(call.op) + ": dgamma and dbeta in different dtypes");
    kernels::layernorm_bwd_cuda(x, s);
    if (dbeta) dbeta->commit();
  } else {
    kernels::RmsNormBwdArgs x;
    x.dy = call.reads[0];
    x.x = call.reads[1];
    x.gamma = call.reads[3];
    x.rrms = b.f();
    x.dx = dx;
    x.dgamma = dgamma.ptr();
    x.accumulate = dgamma.kernel_accumulates();
    x.rows = k.rows;
    x.cols = k.cols;
    x.dtype = kdt(dtp);
    kernels::rmsnorm_bwd_cuda(x, s);
  }
  dgamma.commit();
  if (add) dev::copy2d(dx, dt(dtp), n, call.writes[0], dt(o.writes[0].dtype), n, 1, n, true, s);
}

void activation(const OpCall& call, CudaOpContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const auto d = kdt(call.plan.reads[0].dtype);
  const cudaStream_t s = ctx.stream();
  switch (call.op.kind) {
    case OpKind::gelu_fwd: {
      kernels::GeluFwdArgs x;
      x.x = call.reads[0];
      x.y = call.writes[0];
      x.rows = k.rows;
      x.cols = k.cols;
      x.dtype = d;
      kernels::gelu_fwd_cuda(x, s);
      break;
    }
    case OpKind::gelu_bwd: {
      kernels::GeluBwdArgs x;
      x.dy = call.reads[0];
      x.x = call.reads[1];
      x.dx = call.writes[0];
      x.rows = k.rows;
      x.cols = k.cols;
      x.dtype = d;
      kernels::gelu_bwd_cuda(x, s);
      break;
    }
    case OpKind::swiglu_fwd: {
      expect(call, true, 0, k.rows * 2 * k.cols, "fc1 output");
      kernels::SwigluFwdArgs x;
      x.x = call.reads[0];
      x.y = call.writes[0];
      x.rows = k.rows;
      x.f = k.cols;
      x.dtype = d;
      kernels::swiglu_fwd_cuda(x, s);
      break;
    }
    case OpKind::swiglu_bwd: {
      kernels::SwigluBwdArgs x;
      x.dy = call.reads[0];
      x.x = call.reads[1];
      x.dx = call.writes[0];
      x.rows = k.rows;
      x.f = k.cols;
      x.dtype = d;
      kernels::swiglu_bwd_cuda(x, s);
      break;
    }
    default: break;
  }
}

void softmax(const OpCall& call, CudaOpContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const int64_t sk = k.cols, batches = k.rows / sk;
  if (call.op.kind == OpKind::softmax_fwd) {
    kernels::SoftmaxFwdArgs x;
    x.x = call.reads[0];
    x.y = call.writes[0];
    x.batches = batches;
    x.sq = sk;
    x.sk = sk;
    x.scale = k.scale;
    x.causal = true;
    x.dtype = kdt(call.plan.reads[0].dtype);
    kernels::scaled_masked_softmax_fwd_cuda(x, ctx.stream());
  } else {
    kernels::SoftmaxBwdArgs x;
    x.dy = call.reads[0];
    x.y = call.reads[1];
    x.dx = call.writes[0];
    x.batches = batches;
    x.sq = sk;
    x.sk = sk;
    x.scale = k.scale;
    x.dtype = kdt(call.plan.reads[0].dtype);
    kernels::scaled_masked_softmax_bwd_cuda(x, ctx.stream());
  }
}

// Same as exec/cpu/kernel_ops.cpp: hidden-state dropout in a sequence-parallel region draws
// this tensor rank's slice of the full tensor's mask.
uint64_t dropout_offset(const CudaOpContext& ctx, const Op& op, int64_t n) {
  if (std::string_view(op.name) == "attn_dropout") return 0;
  return ctx.shape.sp ? static_cast<uint64_t>(tp_index(ctx) * n) : 0;
}

void dropout(const OpCall& call, CudaOpContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const int64_t n = k.rows * k.cols;
  const auto d = kdt(call.plan.reads[0].dtype);
  const cudaStream_t s = ctx.stream();
  switch (call.op.kind) {
    case OpKind::dropout_fwd: {
      kernels::DropoutFwdArgs x;
      x.x = call.reads[0];
      x.y = call.writes[0];
      x.mask = call.writes.size() > 1 ? static_cast<uint8_t*>(call.writes[1]) : nullptr;
      x.n = n;
      x.p = k.p;
      x.seed = cpu::dropout_seed(ctx.scenario, call.op, tp_index(ctx));
      x.offset = dropout_offset(ctx, call.op, n);
      x.dtype = d;
      kernels::dropout_fwd_cuda(x, s);
      break;
    }
    case OpKind::dropout_bwd: {
      kernels::DropoutBwdArgs x;
      x.dy = call.reads[0];
      x.mask = static_cast<const uint8_t*>(call.reads[1]);
      x.dx = call.writes[0];
      x.n = n;
      x.p = k.p;
      x.dtype = d;
      kernels::dropout_bwd_cuda(x, s);
      break;
    }
    case OpKind::dropout_add_fwd: {
      kernels::DropoutAddFwdArgs x;
      x.x = call.reads[0];
      x.residual = call.reads[1];
      x.bias = call.reads.size() > 2 ? call.reads[2] : nullptr;
      x.out = call.writes[0];
      x.mask = call.writes.size() > 1 ? static_cast<uint8_t*>(call.writes[1]) : nullptr;
      x.rows = k.rows;
      x.cols = k.cols;
      x.p = k.p;
      x.seed = cpu::dropout_seed(ctx.scenario, call.op, tp_index(ctx));
      x.offset = dropout_offset(ctx, call.op, n);
      x.dtype = d;
      kernels::dropout_add_fwd_cuda(x, s);
      break;
    }
    case OpKind::dropout_add_bwd: {
      std::optional<F32Grad> dbias;
      if (call.writes.size() > 1) dbias.emplace(call.writes[1], call.plan.writes[1], s);
      kernels::DropoutAddBwdArgs x;
      x.dout = call.reads[0];
      x.mask = call.reads.size() > 1 ? static_cast<const uint8_t*>(call.reads[1]) : nullptr;
      x.dx = call.writes[0];
      x.dbias = dbias ? dbias->ptr() : nullptr;
      x.accumulate = dbias && dbias->kernel_accumulates();
      x.rows = k.rows;
      x.cols = k.cols;
      x.p = k.p;
      x.dtype = d;
      kernels::dropout_add_bwd_cuda(x, s);
      if (dbias) dbias->commit();
      break;
    }
    default: break;
  }
}

// This CP rank's chunks of the sequence (exec/plan.hpp seq_pieces), checked against the op's rows.
std::vector<SeqPiece> rank_pieces(const OpCall& call, const CudaOpContext& ctx, int64_t T) {
  const ModelShape& m = ctx.shape;
  if (T != m.seq_local() * m.micro_batch)
    throw InternalError("op " + op_label(call.op) + ": rows do not match the local sequence");
  return seq_pieces(m, ctx.plan.coord.cp);
}

// RoPE on the query heads and key groups (the first (a+g)/t * d columns of every qkv row), in
// fp32 on a packed copy, stored back with one rounding (as the CPU backend). Under CP one
// launch per sequence chunk, each from its global position.
void rope(const OpCall& call, CudaOpContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const ModelShape& m = ctx.shape;
  const cudaStream_t s = ctx.stream();
  const int64_t T = k.rows, cols = k.cols, heads = m.heads_local() + m.groups_local(), d = m.head_dim, w = heads * d;
  expect(call, true, 0, T * cols, "qkv");
  if (k.aux != m.seq_local()) throw InternalError("op " + op_label(call.op) + ": rope sequence is not the local one");
  const DType t = call.plan.reads[0].dtype;
  Scratch buf(T * w * 4, s);
  dev::copy2d(call.reads[0], dt(t), cols, buf.get(), dev::T::f32, w, T, w, false, s);
  kernels::RopeArgs x;
  x.heads = heads;
  x.head_dim = d;
  x.batch = m.micro_batch;
  x.base = k.scale;
  x.dtype = kernels::Dtype::f32;
  for (const SeqPiece& p : rank_pieces(call, ctx, T)) {
    x.x = x.y = buf.f() + p.row0 * w;
    x.rows = p.rows;
    x.position_offset = p.position;
    if (call.op.kind == OpKind::rope_fwd) kernels::rope_fwd_cuda(x, s);
    else kernels::rope_bwd_cuda(x, s);
  }
  dev::copy2d(buf.get(), dev::T::f32, w, call.writes[0], dt(call.plan.writes[0].dtype), cols, T, w, false, s);
}

void embedding(const OpCall& call, CudaOpContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const ModelShape& m = ctx.shape;
  const cudaStream_t s = ctx.stream();
  const int64_t T = k.rows, h = k.cols, V = m.vocab_local(), b = m.micro_batch;
  const int64_t vstart = tp_index(ctx) * V;
  const std::vector<SeqPiece> pieces = rank_pieces(call, ctx, T);  // row r is local position r / b
  if (call.op.kind == OpKind::embedding_fwd) {
    expect(call, true, 0, T, "token ids");
    expect(call, true, 1, V * h, "word embedding table");
    const DType t = call.plan.writes[0].dtype;
    kernels::EmbeddingFwdArgs x;
    x.ids = static_cast<const int32_t*>(call.reads[0]);
    x.table = call.reads[1];
    x.out = call.writes[0];
    x.rows = T;
    x.hidden = h;
    x.vocab_start = vstart;
    x.vocab_end = vstart + V;
    x.dtype = kdt(t);
    kernels::embedding_fwd_cuda(x, s);
    if (call.reads.size() > 2) {  // learned positions: this rank's share, summed by the TP all-reduce
      const DType pt = call.plan.reads[2].dtype;
      const auto [r0, r1] = position_add_rows(ctx.plan, T);
      for (const SeqPiece& p : pieces) {
        const int64_t first = std::max(r0, p.row0), last = std::min(r1, p.row0 + p.rows);
        if (first >= last) continue;
        dev::add_positions(static_cast<char*>(call.writes[0]) + first * h * bytes_of(t), dt(t), call.reads[2], dt(pt),
                           last - first, h, b, p.position + (first - p.row0) / b, s);
      }
    }
    return;
  }
  expect(call, true, 0, T * h, "embedding gradient");
  const F32Grad dtable(call.writes[0], call.plan.writes[0], s);
  kernels::EmbeddingBwdArgs x;
  x.ids = static_cast<const int32_t*>(call.reads[1]);
  x.dout = call.reads[0];
  x.dtable = dtable.ptr();
  x.accumulate = true;  // an fp32 view accumulates; the scratch was zeroed
  x.rows = T;
  x.hidden = h;
  x.vocab_start = vstart;
  x.vocab_end = vstart + V;
  x.dtype = kdt(call.plan.reads[0].dtype);
  kernels::embedding_bwd_cuda(x, s);
  dtable.commit();
  if (call.writes.size() > 1) {
    // The position table is replicated over tensor parallelism: under sequence parallelism its
    // gradient is this rank's sequence slice's share (summed by the IR's replicated-gradient
    // all-reduce), position_grad_rows; each chunk scatters the part of it that it holds.
    const DType ot = call.plan.reads[0].dtype, pt = call.plan.writes[1].dtype;
    const auto [r0, r1] = position_grad_rows(ctx.plan, T);
    for (const SeqPiece& p : pieces) {
      const int64_t first = std::max(r0, p.row0), last = std::min(r1, p.row0 + p.rows);
      if (first >= last) continue;
      if (first % b != 0 || last % b != 0)
        throw InternalError("op " + op_label(call.op) + ": position gradient rows split a position");
      const void* dout = static_cast<const char*>(call.reads[0]) + first * h * bytes_of(ot);
      dev::position_grad(call.writes[1], dt(pt), dout, dt(ot), last - first, h, b, p.position + (first - p.row0) / b, s);
    }
  }
}

void cross_entropy(const OpCall& call, CudaOpContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const cudaStream_t s = ctx.stream();
  const int64_t T = k.rows, V = k.cols, vstart = tp_index(ctx) * ctx.shape.vocab_local();
  switch (call.op.kind) {
    case OpKind::xent_max: {
      kernels::CeMaxArgs x;
      x.logits = call.reads[0];
      x.row_max = static_cast<float*>(call.writes[0]);
      x.rows = T;
      x.vocab = V;
      x.dtype = kdt(call.plan.reads[0].dtype);
      kernels::ce_local_max_cuda(x, s);
      break;
    }
    case OpKind::xent_sum:
      dev::xent_sum(call.reads[0], dt(call.plan.reads[0].dtype), static_cast<const float*>(call.reads[1]),
                    static_cast<const int32_t*>(call.reads[2]), vstart, static_cast<float*>(call.writes[0]),
                    static_cast<float*>(call.writes[1]), T, V, s);
      break;
    case OpKind::xent_loss: {
      Scratch sum(T * 4, s), tgt(T * 4, s);
      const auto* sums = static_cast<const float*>(call.reads[0]);
      dev::copy2d(sums, dev::T::f32, 2, sum.get(), dev::T::f32, 1, T, 1, false, s);
      dev::copy2d(sums + 1, dev::T::f32, 2, tgt.get(), dev::T::f32, 1, T, 1, false, s);
      kernels::CeLossArgs x;
      x.row_max = static_cast<const float*>(call.reads[1]);
      x.sum_exp = sum.f();
      x.target_logit = tgt.f();
      x.loss = static_cast<float*>(call.writes[0]);
      x.rows = T;
      kernels::ce_loss_cuda(x, s);
      // The step's loss for the report, summed on the device (read once after the step).
      dev::accumulate_sum(ctx.loss_acc, static_cast<const float*>(call.writes[0]), T, s);
      ctx.loss_tokens->fetch_add(T);
      break;
    }
    case OpKind::xent_bwd: {
      const float g = k.scale / static_cast<float>(T * std::max<int64_t>(k.aux, 1));
      dev::xent_bwd(static_cast<const float*>(call.reads[0]), static_cast<const float*>(call.reads[1]),
                    static_cast<const int32_t*>(call.reads[2]), vstart, g, call.writes[0], dt(call.plan.writes[0].dtype),
                    T, V, s);
      break;
    }
    default: break;
  }
}

void cast(const OpCall& call, CudaOpContext& ctx) {
  const ModelShape& m = ctx.shape;
  const cudaStream_t s = ctx.stream();
  if (std::string_view(call.op.name) == "dkv_accumulate") {
    // The KV block's gradient, home from the CP ring, added into d_qkv's K and V columns.
    const KernelAttrs& k = *call.op.kernel();
    const int64_t T = k.rows, kv = k.cols, qc = m.qkv_cols(), q = m.attn_cols();
    const DType st = call.plan.reads[0].dtype, dtp = call.plan.writes[0].dtype;
    dev::copy2d(call.reads[0], dt(st), kv, static_cast<char*>(call.writes[0]) + q * bytes_of(dtp), dt(dtp), qc, T, kv, true, s);
    return;
  }
  kernels::CastArgs x;
  x.src = call.reads[0];
  x.src_dtype = kdt(call.plan.reads[0].dtype);
  x.dst = call.writes[0];
  x.dst_dtype = kdt(call.plan.writes[0].dtype);
  x.n = std::min(call.plan.reads[0].numel, call.plan.writes[0].numel);
  kernels::cast_cuda(x, s);
}

void optimizer(const OpCall& call, CudaOpContext& ctx) {
  const TrainingConfig& t = ctx.scenario.training;
  const cudaStream_t s = ctx.stream();
  const bool mixed = is_mixed(t.precision), adam = t.optimizer == Optimizer::adam;
  const bool fp16 = t.precision == Precision::fp16, clip = t.clip_grad > 0;
  const auto& o = call.plan;
  const int64_t n = o.reads[0].numel;
  const size_t want_reads = 2 + mixed + adam + fp16 + clip, want_writes = 2 + mixed + adam;
  if (o.reads.size() != want_reads || o.writes.size() != want_writes)
    throw InternalError("op " + op_label(call.op) + ": optimizer has " + std::to_string(o.reads.size()) + " reads and " +
                        std::to_string(o.writes.size()) + " writes, expected " + std::to_string(want_reads) + " and " +
                        std::to_string(want_writes));
  for (size_t w = 0; w < o.writes.size(); ++w)
    if (o.writes[w].numel != n) throw InternalError("op " + op_label(call.op) + ": optimizer views differ in size");
  size_t wi = 1;
  float* master = mixed ? static_cast<float*>(call.writes[wi++]) : static_cast<float*>(call.writes[0]);
  if (!mixed && o.writes[0].dtype != DType::f32)
    throw InternalError("op " + op_label(call.op) + ": fp32 training with non-fp32 weights");
  float* s1 = static_cast<float*>(call.writes[wi++]);
  float* s2 = adam ? static_cast<float*>(call.writes[wi++]) : nullptr;
  size_t ri = 2 + mixed + adam;
  const float* found_flag = fp16 ? static_cast<const float*>(call.reads[ri++]) : nullptr;
  const float* norm_sq = clip ? static_cast<const float*>(call.reads[ri++]) : nullptr;
  // found (int32) and the gradient divisor S / clip_coef, computed on the device.
  auto* found = static_cast<int32_t*>(ctx.res.scalars) + 8;
  float* divisor = static_cast<float*>(ctx.res.scalars) + 9;
  const float* scale = fp16 ? static_cast<const float*>(ctx.scaler) : nullptr;  // LossScaleState::scale is first
  dev::optimizer_scalars(found_flag, norm_sq, scale, t.clip_grad, found, divisor, s);
  const kernels::Dtype gdt = kdt(o.reads[0].dtype);
  if (adam) {
    kernels::AdamWArgs x;
    x.master = master;
    x.exp_avg = s1;
    x.exp_avg_sq = s2;
    x.grad = call.reads[0];
    x.grad_dtype = gdt;
    x.param = mixed ? call.writes[0] : nullptr;
    x.param_dtype = kdt(o.writes[0].dtype);
    x.n = n;
    x.lr = static_cast<float>(t.lr);
    x.beta1 = static_cast<float>(t.adam_beta1);
    x.beta2 = static_cast<float>(t.adam_beta2);
    x.eps = static_cast<float>(t.adam_eps);
    x.weight_decay = static_cast<float>(t.weight_decay);
    x.step = call.step;
    x.grad_scale = 1.0f;
    x.loss_scale = divisor;
    x.found_inf = fp16 ? found : nullptr;
    kernels::adamw_step_cuda(x, s);
  } else {
    kernels::SgdArgs x;
    x.master = master;
    x.momentum_buf = s1;
    x.grad = call.reads[0];
    x.grad_dtype = gdt;
    x.param = mixed ? call.writes[0] : nullptr;
    x.param_dtype = kdt(o.writes[0].dtype);
    x.n = n;
    x.lr = static_cast<float>(t.lr);
    x.momentum = static_cast<float>(t.sgd_momentum);
    x.weight_decay = static_cast<float>(t.weight_decay);
    x.step = call.step;
    x.grad_scale = 1.0f;
    x.loss_scale = divisor;
    x.found_inf = fp16 ? found : nullptr;
    kernels::sgd_step_cuda(x, s);
  }
}

}  // namespace

void run_kernel(const OpCall& call, CudaOpContext& ctx) {
  const Op& op = call.op;
  const cudaStream_t s = ctx.stream();
  switch (op.kind) {
    case OpKind::layernorm_fwd:
    case OpKind::rmsnorm_fwd: norm_fwd(call, ctx); break;
    case OpKind::layernorm_bwd:
    case OpKind::rmsnorm_bwd: norm_bwd(call, ctx); break;
    case OpKind::gelu_fwd:
    case OpKind::gelu_bwd:
    case OpKind::swiglu_fwd:
    case OpKind::swiglu_bwd: activation(call, ctx); break;
    case OpKind::softmax_fwd:
    case OpKind::softmax_bwd: softmax(call, ctx); break;
    case OpKind::dropout_fwd:
    case OpKind::dropout_bwd:
    case OpKind::dropout_add_fwd:
    case OpKind::dropout_add_bwd: dropout(call, ctx); break;
    case OpKind::rope_fwd:
    case OpKind::rope_bwd: rope(call, ctx); break;
    case OpKind::embedding_fwd:
    case OpKind::embedding_bwd: embedding(call, ctx); break;
    case OpKind::xent_max:
    case OpKind::xent_sum:
    case OpKind::xent_loss:
    case OpKind::xent_bwd: cross_entropy(call, ctx); break;
    case OpKind::cast: cast(call, ctx); break;
    case OpKind::overflow_check: {
      auto* found = static_cast<int32_t*>(ctx.res.scalars) + 10;
      PARALAB_CU(cudaMemsetAsync(found, 0, 4, s));
      kernels::CheckOverflowArgs x;
      x.buf = call.reads[0];
      x.n = call.plan.reads[0].numel;
      x.dtype = kdt(call.plan.reads[0].dtype);
      x.found_inf = found;
      kernels::check_overflow_cuda(x, s);
      dev::flag_max(static_cast<float*>(call.writes[0]), found, s);
      break;
    }
    case OpKind::grad_norm: {
      kernels::L2NormSqArgs x;
      x.buf = call.reads[0];
      x.n = call.plan.reads[0].numel;
      x.dtype = kdt(call.plan.reads[0].dtype);
      x.out = static_cast<float*>(call.writes[0]);
      x.accumulate = true;
      kernels::l2norm_sq_cuda(x, s);
      break;
    }
    case OpKind::optimizer_step: optimizer(call, ctx); break;
    case OpKind::scaler_update: {
      auto* flag = static_cast<float*>(call.writes[0]);
      dev::scaler_found(ctx.scaler, flag, s);
      kernels::LossScaleConfig cfg;
      cfg.growth_interval = static_cast<int32_t>(std::max<int64_t>(op.kernel()->aux, 1));
      kernels::update_scale_cuda(static_cast<kernels::LossScaleState*>(ctx.scaler), cfg, s);
      PARALAB_CU(cudaMemsetAsync(flag, 0, 4, s));
      break;
    }
    default: throw InternalError("op " + op_label(op) + ": no CUDA implementation for this kind");
  }
}

}  // namespace paralab::exec::cuda
