// paralab exec/cpu — layernorm and rmsnorm, forward and backward, on the CPU twins of kernels/
// (arguments: exec/kernel_args.hpp): [rows, 2] statistics (mean, rstd) or (0, rrms) between the
// passes, dgamma and dbeta accumulated in fp32, the residual gradient added into when the op
// says so (KernelAttrs::aux = 1).
#include <algorithm>
#include <optional>

#include "exec/cpu/kernel_families.hpp"

namespace paralab::exec::cpu {

namespace {

// reads {x, gamma, [beta]}, writes {y, stats [rows, 2]}.
void norm_fwd(const OpCall& call, CpuContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  args::expect_numel(call, true, 0, k.rows * k.cols, "x");
  args::expect_numel(call, false, 1, k.rows * 2, "stats");
  float* a = ctx.scratch.get(0, k.rows);
  float* b = ctx.scratch.get(1, k.rows);
  if (call.op.kind == OpKind::layernorm_fwd) {
    kernels::layernorm_fwd_cpu(args::layernorm_fwd(call, a, b));
  } else {
    kernels::rmsnorm_fwd_cpu(args::rmsnorm_fwd(call, b));
    std::fill(a, a + k.rows, 0.0f);
  }
  auto* stats = static_cast<float*>(call.writes[1]);
  for (int64_t r = 0; r < k.rows; ++r) {  // stats [rows, 2] = (mean, rstd) or (0, rrms)
    stats[2 * r] = a[r];
    stats[2 * r + 1] = b[r];
  }
}

// reads {dy, x, stats, gamma, [residual grad]}, writes {residual grad, dgamma, [dbeta]}.
void norm_bwd(const OpCall& call, CpuContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const auto& o = call.plan;
  const int64_t n = k.rows * k.cols;
  args::expect_numel(call, true, 0, n, "dy");
  args::expect_numel(call, true, 2, k.rows * 2, "stats");
  const DType dt = o.reads[0].dtype;
  const auto* stats = static_cast<const float*>(call.reads[2]);
  float* a = ctx.scratch.get(0, k.rows);
  float* b = ctx.scratch.get(1, k.rows);
  for (int64_t r = 0; r < k.rows; ++r) {
    a[r] = stats[2 * r];
    b[r] = stats[2 * r + 1];
  }
  // aux = 1: dx is added into the residual gradient; else it overwrites it.
  const bool add = k.aux == 1;
  void* dx = add ? static_cast<void*>(ctx.scratch.get(2, n)) : call.writes[0];
  const F32Grad dgamma(call.writes[1], o.writes[1], ctx.scratch.get(3, k.cols));
  if (call.op.kind == OpKind::layernorm_bwd) {
    std::optional<F32Grad> dbeta;
    if (call.writes.size() > 2) dbeta.emplace(call.writes[2], o.writes[2], ctx.scratch.get(4, k.cols));
    kernels::layernorm_bwd_cpu(
        args::layernorm_bwd(call, a, b, dx, dgamma.ptr(), dbeta ? dbeta->ptr() : nullptr, dgamma.kernel_accumulates()));
    if (dbeta) dbeta->commit();
  } else {
    kernels::rmsnorm_bwd_cpu(args::rmsnorm_bwd(call, b, dx, dgamma.ptr(), dgamma.kernel_accumulates()));
  }
  dgamma.commit();
  if (add) {
    void* res = call.writes[0];
    const DType rt = o.writes[0].dtype;
    for (int64_t i = 0; i < n; ++i) store(res, rt, i, load(res, rt, i) + load(dx, dt, i));
  }
}

}  // namespace

void add_norm_ops(CpuKernelTable& t) {
  t.add({OpKind::layernorm_fwd, OpKind::rmsnorm_fwd}, norm_fwd);
  t.add({OpKind::layernorm_bwd, OpKind::rmsnorm_bwd}, norm_bwd);
}

}  // namespace paralab::exec::cpu
