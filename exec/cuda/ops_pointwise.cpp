// paralab exec/cuda — the pointwise and row-wise ops on the kernels/ CUDA launchers, with the
// arguments every backend shares (exec/kernel_args.hpp): gelu and swiglu, the scaled causal
// softmax of unfused attention, attention-probability dropout and the fused bias + dropout +
// residual add, forward and backward. One entry per kind.
#include <optional>

#include "exec/cuda/kernel_families.hpp"

namespace paralab::exec::cuda {

namespace {

// reads {dout, [mask]}, writes {dx, [d bias]} (the bias gradient accumulates in fp32).
void dropout_add_bwd(const OpCall& call, CudaOpContext& ctx) {
  const cudaStream_t s = ctx.stream();
  std::optional<F32Grad> dbias;
  if (call.writes.size() > 1) dbias.emplace(call.writes[1], call.plan.writes[1], s);
  kernels::dropout_add_bwd_cuda(args::dropout_add_bwd(call, dbias ? dbias->ptr() : nullptr, dbias && dbias->kernel_accumulates()), s);
  if (dbias) dbias->commit();
}

}  // namespace

void add_pointwise_ops(CudaKernelTable& t) {
  using C = CudaOpContext;
  t.add({OpKind::gelu_fwd}, [](const OpCall& c, C& x) { kernels::gelu_fwd_cuda(args::gelu_fwd(c), x.stream()); });
  t.add({OpKind::gelu_bwd}, [](const OpCall& c, C& x) { kernels::gelu_bwd_cuda(args::gelu_bwd(c), x.stream()); });
  t.add({OpKind::swiglu_fwd}, [](const OpCall& c, C& x) { kernels::swiglu_fwd_cuda(args::swiglu_fwd(c), x.stream()); });
  t.add({OpKind::swiglu_bwd}, [](const OpCall& c, C& x) { kernels::swiglu_bwd_cuda(args::swiglu_bwd(c), x.stream()); });
  t.add({OpKind::softmax_fwd},
        [](const OpCall& c, C& x) { kernels::scaled_masked_softmax_fwd_cuda(args::softmax_fwd(c), x.stream()); });
  t.add({OpKind::softmax_bwd},
        [](const OpCall& c, C& x) { kernels::scaled_masked_softmax_bwd_cuda(args::softmax_bwd(c), x.stream()); });
  t.add({OpKind::dropout_fwd},
        [](const OpCall& c, C& x) { kernels::dropout_fwd_cuda(args::dropout_fwd(c, site(x)), x.stream()); });
  t.add({OpKind::dropout_bwd}, [](const OpCall& c, C& x) { kernels::dropout_bwd_cuda(args::dropout_bwd(c), x.stream()); });
  t.add({OpKind::dropout_add_fwd},
        [](const OpCall& c, C& x) { kernels::dropout_add_fwd_cuda(args::dropout_add_fwd(c, site(x)), x.stream()); });
  t.add({OpKind::dropout_add_bwd}, dropout_add_bwd);
}

}  // namespace paralab::exec::cuda
