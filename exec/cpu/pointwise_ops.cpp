// paralab exec/cpu — the pointwise and row-wise ops on the CPU twins of kernels/ (docs/ir.md,
// "Memory-bound kernels"): gelu and swiglu, the scaled causal softmax of unfused attention,
// attention-probability dropout and the fused bias + dropout + residual add, forward and
// backward. One function per kind.
#include <optional>
#include <string_view>

#include "exec/cpu/kernel_families.hpp"
#include "kernels/dropout.hpp"
#include "kernels/gelu.hpp"
#include "kernels/softmax.hpp"
#include "kernels/swiglu.hpp"

namespace paralab::exec::cpu {

namespace {

kernels::Dtype in_dtype(const OpCall& call) { return kdtype(call.plan.reads[0].dtype); }

void gelu_fwd(const OpCall& call, CpuContext&) {
  const KernelAttrs& k = *call.op.kernel();
  kernels::GeluFwdArgs x;
  x.x = call.reads[0];
  x.y = call.writes[0];
  x.rows = k.rows;
  x.cols = k.cols;
  x.dtype = in_dtype(call);
  kernels::gelu_fwd_cpu(x);
}

void gelu_bwd(const OpCall& call, CpuContext&) {
  const KernelAttrs& k = *call.op.kernel();
  kernels::GeluBwdArgs x;
  x.dy = call.reads[0];
  x.x = call.reads[1];
  x.dx = call.writes[0];
  x.rows = k.rows;
  x.cols = k.cols;
  x.dtype = in_dtype(call);
  kernels::gelu_bwd_cpu(x);
}

// x [rows, 2f] (the fc1 output: gate and up halves) -> y [rows, f].
void swiglu_fwd(const OpCall& call, CpuContext&) {
  const KernelAttrs& k = *call.op.kernel();
  expect_numel(call, true, 0, k.rows * 2 * k.cols, "fc1 output");
  kernels::SwigluFwdArgs x;
  x.x = call.reads[0];
  x.y = call.writes[0];
  x.rows = k.rows;
  x.f = k.cols;
  x.dtype = in_dtype(call);
  kernels::swiglu_fwd_cpu(x);
}

void swiglu_bwd(const OpCall& call, CpuContext&) {
  const KernelAttrs& k = *call.op.kernel();
  kernels::SwigluBwdArgs x;
  x.dy = call.reads[0];
  x.x = call.reads[1];
  x.dx = call.writes[0];
  x.rows = k.rows;
  x.f = k.cols;
  x.dtype = in_dtype(call);
  kernels::swiglu_bwd_cpu(x);
}

// Scores [batches * s, s]: KernelAttrs rows = batches * s, cols = s (self-attention, sq = sk).
void softmax_fwd(const OpCall& call, CpuContext&) {
  const KernelAttrs& k = *call.op.kernel();
  kernels::SoftmaxFwdArgs x;
  x.x = call.reads[0];
  x.y = call.writes[0];
  x.batches = k.rows / k.cols;
  x.sq = k.cols;
  x.sk = k.cols;
  x.scale = k.scale;
  x.causal = true;
  x.dtype = in_dtype(call);
  kernels::scaled_masked_softmax_fwd_cpu(x);
}

void softmax_bwd(const OpCall& call, CpuContext&) {
  const KernelAttrs& k = *call.op.kernel();
  kernels::SoftmaxBwdArgs x;
  x.dy = call.reads[0];
  x.y = call.reads[1];
  x.dx = call.writes[0];
  x.batches = k.rows / k.cols;
  x.sq = k.cols;
  x.sk = k.cols;
  x.scale = k.scale;
  x.dtype = in_dtype(call);
  kernels::scaled_masked_softmax_bwd_cpu(x);
}

// Hidden-state dropouts in sequence-parallel regions draw the tensor-parallel rank's slice of
// the full tensor's mask (stream offset tp * n); attention-probability dropout has its own seed.
uint64_t dropout_offset(const CpuContext& ctx, const Op& op, int64_t n) {
  if (std::string_view(op.name) == "attn_dropout") return 0;
  return ctx.shape.sp ? static_cast<uint64_t>(tp_index(ctx) * n) : 0;
}

void dropout_fwd(const OpCall& call, CpuContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const int64_t n = k.rows * k.cols;
  kernels::DropoutFwdArgs x;
  x.x = call.reads[0];
  x.y = call.writes[0];
  x.mask = call.writes.size() > 1 ? static_cast<uint8_t*>(call.writes[1]) : nullptr;
  x.n = n;
  x.p = k.p;
  x.seed = dropout_seed(ctx.scenario, call.op, tp_index(ctx));
  x.offset = dropout_offset(ctx, call.op, n);
  x.dtype = in_dtype(call);
  kernels::dropout_fwd_cpu(x);
}

void dropout_bwd(const OpCall& call, CpuContext&) {
  const KernelAttrs& k = *call.op.kernel();
  kernels::DropoutBwdArgs x;
  x.dy = call.reads[0];
  x.mask = static_cast<const uint8_t*>(call.reads[1]);
  x.dx = call.writes[0];
  x.n = k.rows * k.cols;
  x.p = k.p;
  x.dtype = in_dtype(call);
  kernels::dropout_bwd_cpu(x);
}

// reads {x, residual, [bias]}, writes {out, [mask]}.
void dropout_add_fwd(const OpCall& call, CpuContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  kernels::DropoutAddFwdArgs x;
  x.x = call.reads[0];
  x.residual = call.reads[1];
  x.bias = call.reads.size() > 2 ? call.reads[2] : nullptr;
  x.out = call.writes[0];
  x.mask = call.writes.size() > 1 ? static_cast<uint8_t*>(call.writes[1]) : nullptr;
  x.rows = k.rows;
  x.cols = k.cols;
  x.p = k.p;
  x.seed = dropout_seed(ctx.scenario, call.op, tp_index(ctx));
  x.offset = dropout_offset(ctx, call.op, k.rows * k.cols);
  x.dtype = in_dtype(call);
  kernels::dropout_add_fwd_cpu(x);
}

// reads {dout, [mask]}, writes {dx, [d bias]} (the bias gradient accumulates in fp32).
void dropout_add_bwd(const OpCall& call, CpuContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  std::optional<F32Grad> dbias;
  if (call.writes.size() > 1) dbias.emplace(call.writes[1], call.plan.writes[1], ctx.scratch.get(0, k.cols));
  kernels::DropoutAddBwdArgs x;
  x.dout = call.reads[0];
  x.mask = call.reads.size() > 1 ? static_cast<const uint8_t*>(call.reads[1]) : nullptr;
  x.dx = call.writes[0];
  x.dbias = dbias ? dbias->ptr() : nullptr;
  x.accumulate = dbias && dbias->kernel_accumulates();
  x.rows = k.rows;
  x.cols = k.cols;
  x.p = k.p;
  x.dtype = in_dtype(call);
  kernels::dropout_add_bwd_cpu(x);
  if (dbias) dbias->commit();
}

}  // namespace

void add_pointwise_ops(CpuKernelTable& t) {
  t.add({OpKind::gelu_fwd}, gelu_fwd).add({OpKind::gelu_bwd}, gelu_bwd);
  t.add({OpKind::swiglu_fwd}, swiglu_fwd).add({OpKind::swiglu_bwd}, swiglu_bwd);
  t.add({OpKind::softmax_fwd}, softmax_fwd).add({OpKind::softmax_bwd}, softmax_bwd);
  t.add({OpKind::dropout_fwd}, dropout_fwd).add({OpKind::dropout_bwd}, dropout_bwd);
  t.add({OpKind::dropout_add_fwd}, dropout_add_fwd).add({OpKind::dropout_add_bwd}, dropout_add_bwd);
}

}  // namespace paralab::exec::cpu
