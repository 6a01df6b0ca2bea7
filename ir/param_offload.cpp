// paralab — the optimizer step of a stage's buckets, on the device and offloaded to the host
// (docs/offload.md). Offload follows ZeRO-Offload's data placement (Ren et al. 2021, Sec. 4):
// fp32 master weights and moments in host memory, stepped by the host's cores; the reduced
// low-precision gradients copied device-to-host, the updated low-precision parameters
// host-to-device. Megatron-LM's --optimizer-offload-fraction splits each rank's shard: the
// first host_n elements are the host's, the rest stay on the device.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "ir/error.hpp"
#include "ir/param_store.hpp"

namespace paralab {

void ParamStore::create_optimizer_buffers(Bucket& bk, const std::string& name, int64_t n, bool mixed, bool adam) {
  const double fraction = offload_opt_ ? s_.training.optimizer_offload_fraction : 0.0;
  bk.host_n = std::clamp<int64_t>(std::llround(fraction * static_cast<double>(n)), 0, n);
  if (offload_params_ && bk.host_n != n)
    throw InternalError("ParamStore: offload_param needs the whole optimizer shard on the host");
  // Optimizer state (ZeRO's K*Psi): fp32 master copy when mixed precision, Adam's two moments
  // or SGD's momentum, all fp32, sharded from ZeRO-1 on. Device part: [host_n, n).
  const int64_t dev_n = n - bk.host_n;
  bk.has_master = mixed;
  bk.has_state2 = adam;
  const char* s1 = adam ? ".exp_avg" : ".momentum";
  if (dev_n > 0) {
    if (mixed) bk.master = b_.buffer(name + ".master", dev_n, DType::f32, MemCategory::optimizer, true);
    bk.state1 = b_.buffer(name + s1, dev_n, DType::f32, MemCategory::optimizer, true);
    if (adam) bk.state2 = b_.buffer(name + ".exp_avg_sq", dev_n, DType::f32, MemCategory::optimizer, true);
  }
  if (bk.host_n == 0) return;
  const int64_t h = bk.host_n;
  const std::string hn = name + ".host";
  if (mixed) bk.h_master = b_.host_buffer(hn + ".master", h, DType::f32, MemCategory::optimizer);
  bk.h_state1 = b_.host_buffer(hn + s1, h, DType::f32, MemCategory::optimizer);
  if (adam) bk.h_state2 = b_.host_buffer(hn + ".exp_avg_sq", h, DType::f32, MemCategory::optimizer);
  // Staging: the gradients as copied, and the parameters the host step writes for the device
  // (under offload_param, the host weight shard itself).
  bk.h_grad = b_.host_buffer(hn + ".grads", h, grad_dtype_, MemCategory::grads);
  bk.h_param = offload_params_ ? bk.weights : b_.host_buffer(hn + ".params", h, m_.act, MemCategory::weights);
}

OpId ParamStore::copy(const char* name, Stream s, TensorRef from, TensorRef to) {
  OpSpec spec;
  spec.kind = OpKind::copy;
  spec.stream = s;
  spec.name = name;
  spec.bytes = static_cast<double>(from.bytes());  // what crosses the link once
  spec.reads = {from};
  spec.writes = {to};
  return b_.add(std::move(spec));
}

// reads {g, master?, s1, s2?, flags...}, writes {w, master?, s1, s2?}: the layout both
// executors bind (without a master, w is stepped in place).
OpSpec ParamStore::step_spec(TensorRef g, TensorRef w, std::optional<BufferId> master, BufferId s1,
                             std::optional<BufferId> s2, std::vector<std::optional<BufferId>> flags) const {
  OpSpec spec;
  spec.kind = OpKind::optimizer_step;
  spec.name = s_.training.optimizer == Optimizer::adam ? "adam" : "sgd";
  spec.reads = {g};
  spec.writes = {w};
  auto both = [&](BufferId b) {
    spec.reads.push_back(b_.whole(b));
    spec.writes.push_back(b_.whole(b));
  };
  if (master) both(*master);
  both(s1);
  if (s2) both(*s2);
  for (const auto& f : flags)
    if (f) spec.reads.push_back(b_.whole(*f));
  spec.attrs = KernelAttrs{g.numel(), 1, 0, 0, 1, 0};
  spec.flops = 12.0 * static_cast<double>(g.numel());  // AdamW: ~12 FLOP per parameter
  return spec;
}

void ParamStore::emit_optimizer(std::optional<BufferId> found_inf, std::optional<BufferId> norm) {
  // Megatron's step() copies after the gradients are final and clipped: the first copy waits for
  // the last op before the optimizer (the scalar reductions, or the last gradient reduction).
  const OpId ready = b_.size() > 0 ? static_cast<OpId>(b_.size() - 1) : kNoOp;
  auto opt = [](bool has, BufferId b) { return has ? std::optional<BufferId>(b) : std::nullopt; };
  // Device part of every bucket first: it needs nothing from the host.
  for (Bucket& bk : buckets_) {
    const TensorRef g = grad_target(bk), w = weight_target(bk);
    const int64_t n = g.numel(), h = bk.host_n;
    if (h == n) continue;
    const TensorRef gd = h == 0 ? g : b_.view(g.buffer, {n - h}, g.offset + h);
    const TensorRef wd = h == 0 ? w : b_.view(w.buffer, {n - h}, w.offset + h);
    b_.add(step_spec(gd, wd, opt(bk.has_master, bk.master), bk.state1, opt(bk.has_state2, bk.state2), {found_inf, norm}));
  }
  if (!offload_opt_) return;
  const size_t first_copy = b_.size();
  auto to_host = [&](std::optional<BufferId> f) -> std::optional<BufferId> {
    if (!f) return std::nullopt;
    const BufferId hf = b_.host_buffer(b_.buf(*f).name + ".host", 1, DType::f32, MemCategory::buffers);
    copy("scalar_d2h", Stream::d2h, b_.whole(*f), b_.whole(hf));
    return hf;
  };
  const std::optional<BufferId> h_inf = to_host(found_inf), h_norm = to_host(norm);
  std::vector<OpId> d2h, steps, h2d;
  std::vector<Bucket*> offloaded;
  for (Bucket& bk : buckets_)
    if (bk.host_n > 0) offloaded.push_back(&bk);
  for (Bucket* bk : offloaded) {
    const TensorRef g = grad_target(*bk);
    d2h.push_back(copy("grad_d2h", Stream::d2h, b_.view(g.buffer, {bk->host_n}, g.offset), b_.whole(bk->h_grad)));
  }
  if (ready != kNoOp && b_.size() > first_copy) b_.depend(static_cast<OpId>(first_copy), ready);
  for (Bucket* bk : offloaded) {
    OpSpec spec = step_spec(b_.whole(bk->h_grad), b_.whole(bk->h_param), opt(bk->has_master, bk->h_master),
                            bk->h_state1, opt(bk->has_state2, bk->h_state2), {h_inf, h_norm});
    spec.stream = Stream::host;
    steps.push_back(b_.add(std::move(spec)));
  }
  if (!offload_params_)
    for (Bucket* bk : offloaded) {
      const TensorRef w = weight_target(*bk);
      h2d.push_back(copy("param_h2d", Stream::h2d, b_.whole(bk->h_param), b_.view(w.buffer, {bk->host_n}, w.offset)));
    }
  // --overlap-cpu-optimizer-d2h-h2d off: every copy down, then every step, then every copy up.
  if (!s_.training.overlap_cpu_optimizer_d2h_h2d && !d2h.empty()) {
    b_.depend(steps.front(), d2h.back());
    if (!h2d.empty()) b_.depend(h2d.front(), steps.back());
  }
}

}  // namespace paralab
