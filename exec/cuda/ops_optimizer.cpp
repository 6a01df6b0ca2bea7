// paralab exec/cuda — the ops around the optimizer, on the kernels/ CUDA launchers, with the
// CPU backend's conventions (exec/cpu/optimizer_ops.cpp): casts and the two accumulating copies
// (a weight gradient into the main gradient without accumulation fusion, a KV block's gradient
// home from the CP ring), the gradient's sum of squares for clipping, the fp16 overflow check,
// Adam(W) or SGD on this rank's shard, and the loss-scale update. The loss scale, the overflow
// flag and the clipping coefficient stay on the device (no host synchronization).
#include <string_view>

#include "exec/cuda/kernel_families.hpp"

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
    args::expect_numel(call, true, 0, n, "fresh gradient");
    dev::copy2d(call.reads[0], dt(call.plan.reads[0].dtype), n, call.writes[0], dt(call.plan.writes[0].dtype), n, 1, n,
                true, s);
    return;
  }
  kernels::cast_cuda(args::cast(call), s);
}

// Adam(W) or SGD on this rank's shard. The gradient divisor (loss scale / clipping coefficient)
// and the overflow flag are computed on the device (dev::optimizer_scalars) into the stream's
// scalars, so nothing waits for the host.
void optimizer(const OpCall& call, CudaOpContext& ctx) {
  if (call.op.stream == Stream::host) {  // the offloaded shard: on the host's cores
    host_optimizer(call, ctx);
    return;
  }
  const TrainingConfig& t = ctx.scenario.training;
  const cudaStream_t s = ctx.stream();
  const args::OptimizerViews v = args::optimizer_views(call, t);
  const bool fp16 = t.precision == Precision::fp16;
  auto* found = ScalarSlots::at<int32_t>(ctx.res.scalars, ScalarSlots::kOptimizerFound);
  auto* divisor = ScalarSlots::at<float>(ctx.res.scalars, ScalarSlots::kOptimizerDivisor);
  const float* scale = fp16 ? static_cast<const float*>(ctx.scaler) : nullptr;  // LossScaleState::scale is first
  dev::optimizer_scalars(v.found_flag, v.norm_sq, scale, t.clip_grad, found, divisor, s);
  if (t.optimizer == Optimizer::adam) {
    kernels::AdamWArgs x = args::adamw(v, t, call.step);
    x.loss_scale = divisor;
    x.found_inf = fp16 ? found : nullptr;
    kernels::adamw_step_cuda(x, s);
  } else {
    kernels::SgdArgs x = args::sgd(v, t, call.step);
    x.loss_scale = divisor;
    x.found_inf = fp16 ? found : nullptr;
    kernels::sgd_step_cuda(x, s);
  }
}

// Any inf or NaN in the gradient view: the flag [1] keeps the max over the step's checks.
void overflow_check(const OpCall& call, CudaOpContext& ctx) {
  const cudaStream_t s = ctx.stream();
  auto* found = ScalarSlots::at<int32_t>(ctx.res.scalars, ScalarSlots::kOverflowFound);
  PARALAB_CU(cudaMemsetAsync(found, 0, 4, s));
  kernels::check_overflow_cuda(args::overflow_check(call, found), s);
  dev::flag_max(static_cast<float*>(call.writes[0]), found, s);
}

// The loss-scale state machine steps on the step's (all-reduced) overflow flag, then clears it.
void scaler_update(const OpCall& call, CudaOpContext& ctx) {
  const cudaStream_t s = ctx.stream();
  auto* flag = static_cast<float*>(call.writes[0]);
  dev::scaler_found(ctx.scaler, flag, s);
  kernels::update_scale_cuda(static_cast<kernels::LossScaleState*>(ctx.scaler), args::loss_scale_config(call), s);
  PARALAB_CU(cudaMemsetAsync(flag, 0, 4, s));
}

}  // namespace

void add_optimizer_ops(CudaKernelTable& t) {
  t.add({OpKind::cast}, cast).add({OpKind::overflow_check}, overflow_check);
  // This rank's partial sum of squares, accumulated over the step's gradient views.
  t.add({OpKind::grad_norm},
        [](const OpCall& c, CudaOpContext& x) { kernels::l2norm_sq_cuda(args::grad_norm(c), x.stream()); });
  t.add({OpKind::optimizer_step}, optimizer).add({OpKind::scaler_update}, scaler_update);
}

}  // namespace paralab::exec::cuda
