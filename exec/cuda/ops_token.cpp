// paralab exec/cuda — the ops that know token positions and the vocabulary, on the kernels/
// CUDA launchers and the backend's own kernels (device_ops.hpp), with the arguments every
// backend shares (exec/kernel_args.hpp): RoPE over this context-parallel rank's chunks of the
// sequence, the vocab-parallel embedding with learned positions, and the vocab-parallel
// cross-entropy stages (local max, exp-sum and target logit, loss, gradient).
#include <algorithm>
#include <vector>

#include "exec/cuda/kernel_families.hpp"
#include "ir/error.hpp"
#include "kernels/rope.hpp"

namespace paralab::exec::cuda {

namespace {

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
  args::expect_numel(call, true, 0, T * cols, "qkv");
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

// reads {token ids [T], this rank's vocabulary slice of the table [V, h], [positions]}, writes
// the hidden states [T, h]: rows of ids outside the slice are zero (summed over tensor ranks).
void embedding_fwd(const OpCall& call, CudaOpContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const cudaStream_t s = ctx.stream();
  const int64_t T = k.rows, h = k.cols, b = ctx.shape.micro_batch;
  const std::vector<SeqPiece> pieces = rank_pieces(call, ctx, T);  // row r is local position r / b
  const DType t = call.plan.writes[0].dtype;
  kernels::embedding_fwd_cuda(args::embedding_fwd(call, site(ctx)), s);
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
}

// reads {d hidden [T, h], token ids}, writes {d table, [d positions]}: scatter-adds.
void embedding_bwd(const OpCall& call, CudaOpContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const cudaStream_t s = ctx.stream();
  const int64_t T = k.rows, h = k.cols, b = ctx.shape.micro_batch;
  const std::vector<SeqPiece> pieces = rank_pieces(call, ctx, T);  // row r is local position r / b
  const F32Grad dtable(call.writes[0], call.plan.writes[0], s);
  kernels::embedding_bwd_cuda(args::embedding_bwd(call, site(ctx), dtable.ptr()), s);
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

// exp(logit - max) kept for the backward pass; [T, 2] = (sum of exps, target logit or 0).
void xent_sum(const OpCall& call, CudaOpContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  dev::xent_sum(call.reads[0], dt(call.plan.reads[0].dtype), static_cast<const float*>(call.reads[1]),
                static_cast<const int32_t*>(call.reads[2]), args::vocab_start(site(ctx)), static_cast<float*>(call.writes[0]),
                static_cast<float*>(call.writes[1]), k.rows, k.cols, ctx.stream());
}

// reads {[T, 2] sums (all-reduced), row max}, writes the per-token loss [T]; the step's loss for
// the report is summed on the device (read once after the step).
void xent_loss(const OpCall& call, CudaOpContext& ctx) {
  const int64_t T = call.op.kernel()->rows;
  const cudaStream_t s = ctx.stream();
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
  dev::accumulate_sum(ctx.loss_acc, static_cast<const float*>(call.writes[0]), T, s);
  ctx.loss_tokens->fetch_add(T);
}

// d logits = (softmax - onehot) * xent_grad_scale: the current loss scale / (T * micro-batches *
// the gradient-reduction group), as the CPU backend and --verify (exec/plan.hpp). With fp16 the
// dynamic scale is read on the device (LossScaleState::scale is first), as the optimizer does.
void xent_bwd(const OpCall& call, CudaOpContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const bool scaled = ctx.scenario.training.precision == Precision::fp16;
  const float g = static_cast<float>(xent_grad_scale(ctx.plan, k, 1.0));
  dev::xent_bwd(static_cast<const float*>(call.reads[0]), static_cast<const float*>(call.reads[1]),
                static_cast<const int32_t*>(call.reads[2]), args::vocab_start(site(ctx)), g,
                scaled ? static_cast<const float*>(ctx.scaler) : nullptr, call.writes[0], dt(call.plan.writes[0].dtype), k.rows,
                k.cols, ctx.stream());
}

}  // namespace

void add_token_ops(CudaKernelTable& t) {
  t.add({OpKind::rope_fwd, OpKind::rope_bwd}, rope);
  t.add({OpKind::embedding_fwd}, embedding_fwd).add({OpKind::embedding_bwd}, embedding_bwd);
  t.add({OpKind::xent_max},
        [](const OpCall& c, CudaOpContext& x) { kernels::ce_local_max_cuda(args::xent_max(c), x.stream()); });
  t.add({OpKind::xent_sum}, xent_sum);
  t.add({OpKind::xent_loss}, xent_loss).add({OpKind::xent_bwd}, xent_bwd);
}

}  // namespace paralab::exec::cuda
