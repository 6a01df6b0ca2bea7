// paralab exec/cpu — the ops around the optimizer, on the CPU twins of kernels/ (docs/ir.md,
// "Memory-bound kernels"): casts and the two accumulating copies (a weight gradient into the
// main gradient without accumulation fusion, a KV block's gradient home from the CP ring), the
// gradient's sum of squares for clipping, the fp16 overflow check, Adam(W) or SGD on this
// rank's shard with the loss scale and clipping coefficient, and the loss-scale update.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

#include "exec/cpu/kernel_families.hpp"

namespace paralab::exec::cpu {

namespace {

void cast(const OpCall& call, CpuContext& ctx) {
  const ModelShape& m = ctx.shape;
  if (std::string_view(call.op.name) == "dkv_accumulate") {
    // The KV block's gradient, home from its trip round the CP ring, into d_qkv's K and V columns.
    const KernelAttrs& k = *call.op.kernel();
    const int64_t T = k.rows, kv = k.cols, qkv_cols = m.qkv_cols(), q = m.attn_cols();
    const DType st = call.plan.reads[0].dtype, dt = call.plan.writes[0].dtype;
    for (int64_t r = 0; r < T; ++r)
      for (int64_t c = 0; c < kv; ++c) {
        const int64_t i = r * qkv_cols + q + c;
        store(call.writes[0], dt, i, load(call.writes[0], dt, i) + load(call.reads[0], st, r * kv + c));
      }
    return;
  }
  if (std::string_view(call.op.name) == "grad_accumulate") {
    // No gradient-accumulation fusion: the fresh gradient of a wgrad GEMM is added into the
    // parameter's view of the gradient buffer (Megatron's param.main_grad.add_(param.grad)).
    const int64_t n = call.plan.writes[0].numel;
    args::expect_numel(call, true, 0, n, "fresh gradient");
    float* f = ctx.scratch.get(0, n);
    load_f32(call.reads[0], call.plan.reads[0].dtype, n, f);
    add_into(call.writes[0], call.plan.writes[0].dtype, n, f, true);
    return;
  }
  kernels::cast_cpu(args::cast(call));
}

// Adam(W) or SGD on this rank's shard; with fp16 the loss scale divides the gradient and an
// overflow skips the step, with clipping Megatron's clip_grad_norm coefficient
// min(1, max_norm / (norm + 1e-6)) multiplies the unscaled gradient.
void optimizer(const OpCall& call, CpuContext& ctx) {
  const TrainingConfig& t = ctx.scenario.training;
  const args::OptimizerViews v = args::optimizer_views(call, t);
  const bool fp16 = t.precision == Precision::fp16;
  int32_t found = v.found_flag && v.found_flag[0] > 0 ? 1 : 0;
  float grad_scale = 1.0f;
  if (v.norm_sq) {
    double norm = std::sqrt(static_cast<double>(v.norm_sq[0]));
    if (fp16) norm /= ctx.scaler.scale;
    grad_scale = static_cast<float>(std::min(1.0, t.clip_grad / (norm + 1e-6)));
  }
  if (t.optimizer == Optimizer::adam) {
    kernels::AdamWArgs x = args::adamw(v, t, call.step);
    x.grad_scale = grad_scale;
    x.loss_scale = fp16 ? &ctx.scaler.scale : nullptr;
    x.found_inf = fp16 ? &found : nullptr;
    kernels::adamw_step_cpu(x);
  } else {
    kernels::SgdArgs x = args::sgd(v, t, call.step);
    x.grad_scale = grad_scale;
    x.loss_scale = fp16 ? &ctx.scaler.scale : nullptr;
    x.found_inf = fp16 ? &found : nullptr;
    kernels::sgd_step_cpu(x);
  }
}

// Any inf or NaN in the gradient view: the flag [1] keeps the max over the step's checks.
void overflow_check(const OpCall& call, CpuContext&) {
  int32_t found = 0;
  kernels::check_overflow_cpu(args::overflow_check(call, &found));
  auto* flag = static_cast<float*>(call.writes[0]);
  flag[0] = std::max(flag[0], static_cast<float>(found));
}

// The loss-scale state machine steps on the step's (all-reduced) overflow flag, then clears it.
void scaler_update(const OpCall& call, CpuContext& ctx) {
  auto* flag = static_cast<float*>(call.writes[0]);
  ctx.scaler.found_inf = flag[0] > 0 ? 1 : 0;
  kernels::update_scale_cpu(&ctx.scaler, args::loss_scale_config(call));
  flag[0] = 0;
}

}  // namespace

void add_optimizer_ops(CpuKernelTable& t) {
  t.add({OpKind::cast}, cast).add({OpKind::overflow_check}, overflow_check);
  // This rank's partial sum of squares, accumulated over the step's gradient views.
  t.add({OpKind::grad_norm}, [](const OpCall& c, CpuContext&) { kernels::l2norm_sq_cpu(args::grad_norm(c)); });
  t.add({OpKind::optimizer_step}, optimizer).add({OpKind::scaler_update}, scaler_update);
  // Offload's host <-> device copy (docs/offload.md): a plain copy here, where both are host
  // memory (execute refuses offload on this backend; the table stays complete for --verify).
  t.add({OpKind::copy}, [](const OpCall& c, CpuContext&) {
    const ResolvedRef& r = c.plan.reads.at(0);
    std::memcpy(c.writes[0], c.reads[0], static_cast<size_t>(r.numel * bytes_of(r.dtype)));
  });
  // nn.DataParallel's host launch time: no work of its own (that IR is simulated only).
  t.add({OpKind::launch}, [](const OpCall&, CpuContext&) {});
}

}  // namespace paralab::exec::cpu
