// paralab exec/cpu — the pointwise and row-wise ops on the CPU twins of kernels/ (arguments:
// exec/kernel_args.hpp): gelu and swiglu, the scaled causal softmax of unfused attention,
// attention-probability dropout and the fused bias + dropout + residual add, forward and
// backward. One entry per kind.
#include <optional>

#include "exec/cpu/kernel_families.hpp"

namespace paralab::exec::cpu {

namespace {

// reads {dout, [mask]}, writes {dx, [d bias]} (the bias gradient accumulates in fp32).
void dropout_add_bwd(const OpCall& call, CpuContext& ctx) {
  std::optional<F32Grad> dbias;
  if (call.writes.size() > 1)
    dbias.emplace(call.writes[1], call.plan.writes[1], ctx.scratch.get(0, call.op.kernel()->cols));
  kernels::dropout_add_bwd_cpu(args::dropout_add_bwd(call, dbias ? dbias->ptr() : nullptr, dbias && dbias->kernel_accumulates()));
  if (dbias) dbias->commit();
}

}  // namespace

void add_pointwise_ops(CpuKernelTable& t) {
  using C = CpuContext;
  t.add({OpKind::gelu_fwd}, [](const OpCall& c, C&) { kernels::gelu_fwd_cpu(args::gelu_fwd(c)); });
  t.add({OpKind::gelu_bwd}, [](const OpCall& c, C&) { kernels::gelu_bwd_cpu(args::gelu_bwd(c)); });
  t.add({OpKind::swiglu_fwd}, [](const OpCall& c, C&) { kernels::swiglu_fwd_cpu(args::swiglu_fwd(c)); });
  t.add({OpKind::swiglu_bwd}, [](const OpCall& c, C&) { kernels::swiglu_bwd_cpu(args::swiglu_bwd(c)); });
  t.add({OpKind::softmax_fwd}, [](const OpCall& c, C&) { kernels::scaled_masked_softmax_fwd_cpu(args::softmax_fwd(c)); });
  t.add({OpKind::softmax_bwd}, [](const OpCall& c, C&) { kernels::scaled_masked_softmax_bwd_cpu(args::softmax_bwd(c)); });
  t.add({OpKind::dropout_fwd}, [](const OpCall& c, C& x) { kernels::dropout_fwd_cpu(args::dropout_fwd(c, site(x))); });
  t.add({OpKind::dropout_bwd}, [](const OpCall& c, C&) { kernels::dropout_bwd_cpu(args::dropout_bwd(c)); });
  t.add({OpKind::dropout_add_fwd}, [](const OpCall& c, C& x) { kernels::dropout_add_fwd_cpu(args::dropout_add_fwd(c, site(x))); });
  t.add({OpKind::dropout_add_bwd}, dropout_add_bwd);
}

}  // namespace paralab::exec::cpu
