// paralab — the small op emitters every part of the stage builder shares: GEMMs with their
// FLOPs, memory-bound kernels, and Megatron's tensor-parallel communication operators
// (Shoeybi et al. 2019, f/g; Korthikanti et al. 2022, g/g-bar with sequence parallelism).
#include "ir/stage_builder.hpp"

namespace paralab {

BufferId StageBuilder::act_buffer(const char* name, int64_t rows, int64_t cols, DType dtype, MemCategory cat) {
  std::string full = name;
  if (b_.labels.layer >= 0) full = "L" + std::to_string(b_.labels.layer) + "." + full;
  full += ".mb" + std::to_string(b_.labels.microbatch);
  if (b_.labels.phase == Phase::recompute) full += ".re";
  return b_.buffer(std::move(full), rows * cols, dtype, cat);
}

double StageBuilder::model_part(double flops) const {
  return b_.labels.phase == Phase::recompute ? 0.0 : flops;
}

void StageBuilder::release_if(BufferId& b) {
  if (b == kNoBuffer) return;
  b_.release(b);
  b = kNoBuffer;
}

OpId StageBuilder::linear(const char* name, GemmRole role, TensorRef a, TensorRef w, TensorRef c, int64_t m,
                          int64_t n, int64_t k, bool trans_a, bool trans_b, bool accumulate,
                          const TensorRef* bias, const TensorRef* bias_grad) {
  if (role == GemmRole::linear_wgrad && accumulate && !s_.training.gradient_accumulation_fusion) {
    // Without gradient-accumulation fusion (Megatron before late 2021) autograd's weight-gradient
    // GEMM writes a fresh gradient in the parameters' dtype, and the DDP hook adds it into the
    // main gradient buffer (`param.main_grad.add_(param.grad)`): one more pass over the
    // gradient per micro-batch. The bias gradient takes the same path.
    const BufferId g = act_buffer("wgrad", m, n, m_.act, MemCategory::buffers);
    BufferId bg = kNoBuffer;
    TensorRef bg_view;
    if (bias_grad) {
      bg = act_buffer("bgrad", 1, bias_grad->numel(), m_.act, MemCategory::buffers);
      bg_view = b_.whole(bg);
    }
    const OpId id = linear(name, role, a, w, b_.view(g, {m, n}), m, n, k, trans_a, trans_b, false, bias,
                           bias_grad ? &bg_view : nullptr);
    kernel(OpKind::cast, "grad_accumulate", {b_.whole(g), c}, {c}, KernelAttrs{m, n, 0, 0, 1, 0});
    b_.release(g);
    if (bias_grad) {
      kernel(OpKind::cast, "grad_accumulate", {bg_view, *bias_grad}, {*bias_grad},
             KernelAttrs{1, bias_grad->numel(), 0, 0, 1, 0});
      b_.release(bg);
    }
    return id;
  }
  OpSpec spec;
  spec.kind = OpKind::gemm;
  spec.name = name;
  spec.reads = {a, w};
  if (bias) spec.reads.push_back(*bias);
  if (accumulate) spec.reads.push_back(c);
  spec.writes = {c};
  if (bias_grad) spec.writes.push_back(*bias_grad);
  GemmAttrs g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.accumulate = accumulate;
  g.bias = bias != nullptr || bias_grad != nullptr;
  g.math = m_.math;
  g.role = role;
  spec.attrs = g;
  spec.flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  spec.model_flops = model_part(spec.flops);
  return b_.add(std::move(spec));
}

OpId StageBuilder::kernel(OpKind kind, const char* name, std::vector<TensorRef> reads,
                          std::vector<TensorRef> writes, KernelAttrs attrs, double flops_per_element) {
  OpSpec spec;
  spec.kind = kind;
  spec.name = name;
  spec.reads = std::move(reads);
  spec.writes = std::move(writes);
  spec.attrs = attrs;
  spec.flops = flops_per_element * static_cast<double>(attrs.rows * attrs.cols);
  return b_.add(std::move(spec));
}

BufferId StageBuilder::tp_all_gather(const char* name, BufferId in, MemCategory cat) {
  // Copies, not a reference: act_buffer() appends to the buffer table, which may reallocate.
  const Buffer src = b_.buf(in);
  const int64_t cols = m_.hidden;
  const int64_t rows = src.elements / cols;
  const BufferId out = act_buffer(name, rows * m_.tp, cols, src.dtype, cat);
  OpSpec spec;
  spec.kind = OpKind::collective;
  spec.stream = Stream::tp_comm;
  spec.name = name;
  spec.reads = {b_.whole(in)};
  spec.writes = {b_.whole(out)};
  const int64_t bytes = b_.buf(out).bytes();
  spec.attrs = CollectiveAttrs{CollKind::all_gather, GroupKind::tp, ReduceOp::sum, bytes, b_.next_tag()};
  spec.bytes = static_cast<double>(bytes);
  b_.add(std::move(spec));
  return out;
}

BufferId StageBuilder::tp_reduce_scatter(const char* name, BufferId in) {
  // Copies, not a reference: act_buffer() appends to the buffer table, which may reallocate.
  const Buffer src = b_.buf(in);
  const int64_t cols = m_.hidden;
  const int64_t rows = src.elements / cols;
  const BufferId out = act_buffer(name, rows / m_.tp, cols, src.dtype);
  OpSpec spec;
  spec.kind = OpKind::collective;
  spec.stream = Stream::tp_comm;
  spec.name = name;
  spec.reads = {b_.whole(in)};
  spec.writes = {b_.whole(out)};
  const int64_t bytes = src.bytes();
  spec.attrs = CollectiveAttrs{CollKind::reduce_scatter, GroupKind::tp, ReduceOp::sum, bytes, b_.next_tag()};
  spec.bytes = static_cast<double>(bytes);
  b_.add(std::move(spec));
  return out;
}

void StageBuilder::tp_all_reduce(const char* name, BufferId buf, ReduceOp op) {
  if (m_.tp == 1) return;
  OpSpec spec;
  spec.kind = OpKind::collective;
  spec.stream = Stream::tp_comm;
  spec.name = name;
  spec.reads = {b_.whole(buf)};
  spec.writes = {b_.whole(buf)};
  const int64_t bytes = b_.buf(buf).bytes();
  spec.attrs = CollectiveAttrs{CollKind::all_reduce, GroupKind::tp, op, bytes, b_.next_tag()};
  spec.bytes = static_cast<double>(bytes);
  b_.add(std::move(spec));
}

BufferId StageBuilder::tp_enter(const char* name, BufferId in) {
  return m_.sp ? tp_all_gather(name, in) : in;
}

BufferId StageBuilder::dgrad_reduce_and_wgrad(const char* reduce, BufferId d_in, std::vector<BufferId> reads,
                                              std::function<OpId()> wgrad) {
  if (m_.sp || m_.tp == 1 || s_.parallel.async_tensor_model_parallel_allreduce || deferring_weight_grads()) {
    const BufferId out = tp_exit(reduce, d_in);  // overlaps the weight-gradient GEMM (or its W)
    weight_grad(std::move(reads), std::move(wgrad));
    return out;
  }
  // Synchronous (Megatron 2021): the all-reduce is the backward of the f operator, run by
  // autograd after the linear layer's backward (both GEMMs); the next compute op needs it.
  const OpId w = wgrad();
  const size_t first = b_.size();
  const BufferId out = tp_exit(reduce, d_in);
  for (size_t id = first; id < b_.size(); ++id) b_.depend(static_cast<OpId>(id), w);
  return out;
}

BufferId StageBuilder::tp_exit(const char* name, BufferId partial) {
  if (m_.sp) {
    const BufferId out = tp_reduce_scatter(name, partial);
    b_.release(partial);
    return out;
  }
  tp_all_reduce(name, partial);
  return partial;
}

}  // namespace paralab
