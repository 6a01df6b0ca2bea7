// paralab exec/cpu — the ops around the optimizer, on the CPU twins of kernels/ (docs/ir.md,
// "Memory-bound kernels"): casts and the two accumulating copies (a weight gradient into the
// main gradient without accumulation fusion, a KV block's gradient home from the CP ring), the
// gradient's sum of squares for clipping, the fp16 overflow check, Adam(W) or SGD on this
// rank's shard with the loss scale and clipping coefficient, and the loss-scale update.
#include <algorithm>
#include <cmath>
#include <string_view>

#include "exec/cpu/kernel_families.hpp"
#include "kernels/adamw.hpp"
#include "kernels/cast.hpp"
#include "kernels/l2norm.hpp"
#include "kernels/loss_scale.hpp"
#include "kernels/sgd.hpp"

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
    expect_numel(call, true, 0, n, "fresh gradient");
    float* f = ctx.scratch.get(0, n);
    load_f32(call.reads[0], call.plan.reads[0].dtype, n, f);
    add_into(call.writes[0], call.plan.writes[0].dtype, n, f, true);
    return;
  }
  kernels::CastArgs x;
  x.src = call.reads[0];
  x.src_dtype = kdtype(call.plan.reads[0].dtype);
  x.dst = call.writes[0];
  x.dst_dtype = kdtype(call.plan.writes[0].dtype);
  x.n = std::min(call.plan.reads[0].numel, call.plan.writes[0].numel);
  kernels::cast_cpu(x);
}

void optimizer(const OpCall& call, CpuContext& ctx) {
  const Scenario& s = ctx.scenario;
  const TrainingConfig& t = s.training;
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
  int32_t found = 0;
  if (fp16) found = static_cast<const float*>(call.reads[ri++])[0] > 0 ? 1 : 0;
  float grad_scale = 1.0f;
  if (clip) {
    // Megatron's clip_grad_norm: coefficient min(1, max_norm / (norm + 1e-6)) over unscaled grads.
    double norm = std::sqrt(static_cast<double>(static_cast<const float*>(call.reads[ri++])[0]));
    if (fp16) norm /= ctx.scaler.scale;
    grad_scale = static_cast<float>(std::min(1.0, t.clip_grad / (norm + 1e-6)));
  }
  const kernels::Dtype gdt = kdtype(o.reads[0].dtype);
  if (adam) {
    kernels::AdamWArgs x;
    x.master = master;
    x.exp_avg = s1;
    x.exp_avg_sq = s2;
    x.grad = call.reads[0];
    x.grad_dtype = gdt;
    x.param = mixed ? call.writes[0] : nullptr;
    x.param_dtype = kdtype(o.writes[0].dtype);
    x.n = n;
    x.lr = static_cast<float>(t.lr);
    x.beta1 = static_cast<float>(t.adam_beta1);
    x.beta2 = static_cast<float>(t.adam_beta2);
    x.eps = static_cast<float>(t.adam_eps);
    x.weight_decay = static_cast<float>(t.weight_decay);
    x.step = call.step;
    x.grad_scale = grad_scale;
    x.loss_scale = fp16 ? &ctx.scaler.scale : nullptr;
    x.found_inf = fp16 ? &found : nullptr;
    kernels::adamw_step_cpu(x);
  } else {
    kernels::SgdArgs x;
    x.master = master;
    x.momentum_buf = s1;
    x.grad = call.reads[0];
    x.grad_dtype = gdt;
    x.param = mixed ? call.writes[0] : nullptr;
    x.param_dtype = kdtype(o.writes[0].dtype);
    x.n = n;
    x.lr = static_cast<float>(t.lr);
    x.momentum = static_cast<float>(t.sgd_momentum);
    x.weight_decay = static_cast<float>(t.weight_decay);
    x.step = call.step;
    x.grad_scale = grad_scale;
    x.loss_scale = fp16 ? &ctx.scaler.scale : nullptr;
    x.found_inf = fp16 ? &found : nullptr;
    kernels::sgd_step_cpu(x);
  }
}

// Any inf or NaN in the gradient view: the flag [1] keeps the max over the step's checks.
void overflow_check(const OpCall& call, CpuContext&) {
  int32_t found = 0;
  kernels::CheckOverflowArgs x;
  x.buf = call.reads[0];
  x.n = call.plan.reads[0].numel;
  x.dtype = kdtype(call.plan.reads[0].dtype);
  x.found_inf = &found;
  kernels::check_overflow_cpu(x);
  auto* flag = static_cast<float*>(call.writes[0]);
  flag[0] = std::max(flag[0], static_cast<float>(found));
}

// This rank's partial sum of squares, accumulated over the step's gradient views.
void grad_norm(const OpCall& call, CpuContext&) {
  kernels::L2NormSqArgs x;
  x.buf = call.reads[0];
  x.n = call.plan.reads[0].numel;
  x.dtype = kdtype(call.plan.reads[0].dtype);
  x.out = static_cast<float*>(call.writes[0]);
  x.accumulate = true;
  kernels::l2norm_sq_cpu(x);
}

// The loss-scale state machine steps on the step's (all-reduced) overflow flag, then clears it.
void scaler_update(const OpCall& call, CpuContext& ctx) {
  auto* flag = static_cast<float*>(call.writes[0]);
  ctx.scaler.found_inf = flag[0] > 0 ? 1 : 0;
  kernels::LossScaleConfig cfg;
  cfg.growth_interval = static_cast<int32_t>(std::max<int64_t>(call.op.kernel()->aux, 1));
  kernels::update_scale_cpu(&ctx.scaler, cfg);
  flag[0] = 0;
}

}  // namespace

void add_optimizer_ops(CpuKernelTable& t) {
  t.add({OpKind::cast}, cast).add({OpKind::grad_norm}, grad_norm).add({OpKind::overflow_check}, overflow_check);
  t.add({OpKind::optimizer_step}, optimizer).add({OpKind::scaler_update}, scaler_update);
}

}  // namespace paralab::exec::cpu
