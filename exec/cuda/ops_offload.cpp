// paralab exec/cuda — optimizer offload's ops (docs/offload.md): a host <-> device copy
// (cudaMemcpyAsync between pinned host and device memory, on the d2h / h2d stream's copy
// engine) and the host's AdamW step, run by cudaLaunchHostFunc on the host stream so it keeps
// the stream order the IR gives it: it starts when its gradient copy has landed and the next
// host-to-device copy waits for it. The host step reads the clipping norm the scalar copy
// brought to the host and computes the coefficient there, as dev::optimizer_scalars does on
// the device.
#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "exec/cuda/kernel_families.hpp"
#include "kernels/adamw.hpp"

namespace paralab::exec::cuda {

namespace {

std::mutex g_error_mu;
std::string g_error;  // the first host step that failed, reported by take_host_step_error

struct HostStep {
  kernels::AdamWArgs args;
  const float* norm_sq = nullptr;  // host: the step's global sum of squares (clipping), or null
  double clip = 0;
  float divisor = 1;
  int threads = 1;
};

// Runs on a CUDA driver thread: no CUDA calls, no exceptions out.
void CUDART_CB run_host_step(void* data) {
  std::unique_ptr<HostStep> h(static_cast<HostStep*>(data));
  try {
    if (h->norm_sq) h->divisor = static_cast<float>(1.0 / std::min(1.0, h->clip / (std::sqrt(double(*h->norm_sq)) + 1e-6)));
    h->args.loss_scale = &h->divisor;
    kernels::adamw_step_host(h->args, h->threads);
  } catch (const std::exception& e) {
    const std::lock_guard<std::mutex> lock(g_error_mu);
    if (g_error.empty()) g_error = e.what();
  }
}

void copy(const OpCall& call, CudaOpContext& ctx) {
  const ResolvedRef& from = call.plan.reads.at(0);
  const ResolvedRef& to = call.plan.writes.at(0);
  if (from.dtype != to.dtype || from.numel != to.numel)
    throw InternalError("copy op " + call.op.full_name() + ": source and destination views differ");
  PARALAB_CU(cudaMemcpyAsync(call.writes[0], call.reads[0], static_cast<size_t>(from.numel * bytes_of(from.dtype)),
                             cudaMemcpyDefault, ctx.stream()));
}

}  // namespace

void host_optimizer(const OpCall& call, CudaOpContext& ctx) {
  const TrainingConfig& t = ctx.scenario.training;
  if (t.optimizer != Optimizer::adam || t.precision == Precision::fp16)
    throw InternalError("host optimizer step: validated scenarios offload AdamW without fp16 loss scaling only");
  const args::OptimizerViews v = args::optimizer_views(call, t);
  auto h = std::make_unique<HostStep>();
  h->args = args::adamw(v, t, call.step);
  kernels::adamw_check(h->args);  // here, where a bad argument can still throw
  h->norm_sq = v.norm_sq;
  h->clip = t.clip_grad;
  // The host's cores the node's GPUs share, one GPU's part (as the simulator's host share).
  const int64_t gpus = std::max<int64_t>(1, ctx.plan.ir->layout.devices_per_node());
  h->threads = static_cast<int>(std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()) / gpus));
  PARALAB_CU(cudaLaunchHostFunc(ctx.stream(), run_host_step, h.get()));
  (void)h.release();  // run_host_step owns it now
}

std::string take_host_step_error() {
  const std::lock_guard<std::mutex> lock(g_error_mu);
  std::string e;
  e.swap(g_error);
  return e;
}

void add_offload_ops(CudaKernelTable& t) {
  t.add({OpKind::copy}, copy);
  t.add({OpKind::launch}, [](const OpCall&, CudaOpContext&) {});  // nn.DataParallel's host launch: no device work
}

}  // namespace paralab::exec::cuda
