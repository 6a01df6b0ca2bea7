// paralab exec/cuda — the ops around the optimizer, on the kernels/ CUDA launchers, with the
// CPU backend's conventions (exec/cpu/optimizer_ops.cpp): casts and the two accumulating copies
// (a weight gradient into the main gradient without accumulation fusion, a KV block's gradient
// home from the CP ring), the gradient's sum of squares for clipping, the fp16 overflow check,
// Adam(W) or SGD on this rank's shard, and the loss-scale update. The loss scale, the overflow
// flag and the clipping coefficient stay on the device (no host synchronization).
#include <algorithm>
#include <string>
#include <string_view>

#include "exec/cuda/kernel_families.hpp"
#include "ir/error.hpp"
#include "kernels/adamw.hpp"
#include "kernels/cast.hpp"
#include "kernels/l2norm.hpp"
#include "kernels/loss_scale.hpp"
#include "kernels/sgd.hpp"

namespace paralab::exec::cuda {

namespace {

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
  if (std::string_view(call.op.name) == "grad_accumulate") {
    // No gradient-accumulation fusion: the fresh gradient of a wgrad GEMM is added into the
    // parameter's view of the gradient buffer (Megatron's param.main_grad.add_(param.grad)),
    // in fp32 with one rounding, as the CPU backend.
    const int64_t n = call.plan.writes[0].numel;
    expect(call, true, 0, n, "fresh gradient");
    dev::copy2d(call.reads[0], dt(call.plan.reads[0].dtype), n, call.writes[0], dt(call.plan.writes[0].dtype), n, 1, n,
                true, s);
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


// Any inf or NaN in the gradient view: the flag [1] keeps the max over the step's checks.
void overflow_check(const OpCall& call, CudaOpContext& ctx) {
  const cudaStream_t s = ctx.stream();
  auto* found = static_cast<int32_t*>(ctx.res.scalars) + 10;
  PARALAB_CU(cudaMemsetAsync(found, 0, 4, s));
  kernels::CheckOverflowArgs x;
  x.buf = call.reads[0];
  x.n = call.plan.reads[0].numel;
  x.dtype = kdt(call.plan.reads[0].dtype);
  x.found_inf = found;
  kernels::check_overflow_cuda(x, s);
  dev::flag_max(static_cast<float*>(call.writes[0]), found, s);
}

// This rank's partial sum of squares, accumulated over the step's gradient views.
void grad_norm(const OpCall& call, CudaOpContext& ctx) {
  kernels::L2NormSqArgs x;
  x.buf = call.reads[0];
  x.n = call.plan.reads[0].numel;
  x.dtype = kdt(call.plan.reads[0].dtype);
  x.out = static_cast<float*>(call.writes[0]);
  x.accumulate = true;
  kernels::l2norm_sq_cuda(x, ctx.stream());
}

// The loss-scale state machine steps on the step's (all-reduced) overflow flag, then clears it.
void scaler_update(const OpCall& call, CudaOpContext& ctx) {
  const cudaStream_t s = ctx.stream();
  auto* flag = static_cast<float*>(call.writes[0]);
  dev::scaler_found(ctx.scaler, flag, s);
  kernels::LossScaleConfig cfg;
  cfg.growth_interval = static_cast<int32_t>(std::max<int64_t>(call.op.kernel()->aux, 1));
  kernels::update_scale_cuda(static_cast<kernels::LossScaleState*>(ctx.scaler), cfg, s);
  PARALAB_CU(cudaMemsetAsync(flag, 0, 4, s));
}

}  // namespace

void add_optimizer_ops(CudaKernelTable& t) {
  t.add({OpKind::cast}, cast).add({OpKind::grad_norm}, grad_norm).add({OpKind::overflow_check}, overflow_check);
  t.add({OpKind::optimizer_step}, optimizer).add({OpKind::scaler_update}, scaler_update);
}

}  // namespace paralab::exec::cuda
