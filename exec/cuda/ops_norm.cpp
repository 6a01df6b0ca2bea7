// paralab exec/cuda — layernorm and rmsnorm, forward and backward, on the kernels/ CUDA
// launchers, with the arguments every backend shares (exec/kernel_args.hpp): [rows, 2] statistics
// (mean, rstd) or (0, rrms) between the passes, dgamma and dbeta accumulated in fp32, the
// residual gradient added into when the op says so (KernelAttrs::aux = 1).
#include <optional>

#include "exec/cuda/kernel_families.hpp"
#include "ir/error.hpp"

namespace paralab::exec::cuda {

namespace {

void norm_fwd(const OpCall& call, CudaOpContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const cudaStream_t s = ctx.stream();
  args::expect_numel(call, true, 0, k.rows * k.cols, "x");
  args::expect_numel(call, false, 1, k.rows * 2, "stats");
  Scratch a(k.rows * 4, s), b(k.rows * 4, s);
  if (call.op.kind == OpKind::layernorm_fwd) {
    kernels::layernorm_fwd_cuda(args::layernorm_fwd(call, a.f(), b.f()), s);
  } else {
    kernels::rmsnorm_fwd_cuda(args::rmsnorm_fwd(call, b.f()), s);
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
  args::expect_numel(call, true, 0, n, "dy");
  args::expect_numel(call, true, 2, k.rows * 2, "stats");
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
    if (dbeta && dbeta->kernel_accumulates() != dgamma.kernel_accumulates())
      throw InternalError("op " + op_label(call.op) + ": dgamma and dbeta in different dtypes");
    kernels::layernorm_bwd_cuda(
        args::layernorm_bwd(call, a.f(), b.f(), dx, dgamma.ptr(), dbeta ? dbeta->ptr() : nullptr, dgamma.kernel_accumulates()), s);
    if (dbeta) dbeta->commit();
  } else {
    kernels::rmsnorm_bwd_cuda(args::rmsnorm_bwd(call, b.f(), dx, dgamma.ptr(), dgamma.kernel_accumulates()), s);
  }
  dgamma.commit();
  if (add) dev::copy2d(dx, dt(dtp), n, call.writes[0], dt(o.writes[0].dtype), n, 1, n, true, s);
}

}  // namespace

void add_norm_ops(CudaKernelTable& t) {
  t.add({OpKind::layernorm_fwd, OpKind::rmsnorm_fwd}, norm_fwd);
  t.add({OpKind::layernorm_bwd, OpKind::rmsnorm_bwd}, norm_bwd);
}

}  // namespace paralab::exec::cuda
