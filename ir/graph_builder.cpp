// paralab — StepGraph construction with dataflow-inferred dependencies and memory events.
#include "ir/graph_builder.hpp"

#include <algorithm>

#include "ir/error.hpp"

namespace paralab {

GraphBuilder::GraphBuilder(int64_t stage) { g_.stage = stage; }

BufferId GraphBuilder::buffer(std::string name, int64_t elements, DType dtype, MemCategory category,
                              bool resident, int64_t params) {
  if (elements <= 0) throw InternalError("GraphBuilder: buffer '" + name + "' has no elements");
  const auto id = static_cast<BufferId>(g_.buffers.size());
  g_.buffers.push_back(Buffer{std::move(name), elements, dtype, category, resident, params});
  BufferState st;
  st.last_reader.fill(kNoOp);
  st.allocated = resident;
  state_.push_back(st);
  return id;
}

BufferId GraphBuilder::host_buffer(std::string name, int64_t elements, DType dtype, MemCategory category,
                                   int64_t params) {
  const BufferId id = buffer(std::move(name), elements, dtype, category, true, params);
  g_.buffers[id].host = true;
  return id;
}

TensorRef GraphBuilder::view(BufferId b, std::initializer_list<int64_t> shape, int64_t offset) const {
  TensorRef t;
  t.buffer = b;
  t.offset = offset;
  t.dtype = g_.buffers[b].dtype;
  t.rank = static_cast<uint8_t>(shape.size());
  if (shape.size() == 0 || shape.size() > 4) throw InternalError("GraphBuilder::view: rank must be 1..4");
  size_t i = 0;
  for (int64_t d : shape) t.shape[i++] = d;
  if (offset < 0 || offset + t.numel() > g_.buffers[b].elements)
    throw InternalError("GraphBuilder::view: view exceeds buffer '" + g_.buffers[b].name + "'");
  return t;
}

TensorRef GraphBuilder::whole(BufferId b) const { return view(b, {g_.buffers[b].elements}); }

void GraphBuilder::add_dep(Op& op, OpId dep) const {
  if (dep == kNoOp || dep == op.id) return;
  if (g_.ops[dep].stream == op.stream) return;  // implied by stream order
  op.deps.push_back(dep);
}

OpId GraphBuilder::add(OpSpec spec) {
  if (launch_gpus_ > 1 && !off_device(spec.stream) &&
      (labels.phase == Phase::forward || labels.phase == Phase::recompute)) {
    OpSpec l;
    l.kind = OpKind::launch;
    l.stream = Stream::host;
    l.name = "launch";
    l.attrs = KernelAttrs{launch_gpus_, 1, 0, 0, 1, 0};
    l.bytes = 0;
    const int64_t keep = launch_gpus_;
    launch_gpus_ = 0;  // the launch op itself is not launched
    spec.extra_deps.push_back(add(std::move(l)));
    launch_gpus_ = keep;
  }
  Op op;
  op.id = static_cast<OpId>(g_.ops.size());
  op.kind = spec.kind;
  op.stream = spec.stream;
  op.name = spec.name;
  op.phase = labels.phase;
  op.layer = labels.layer;
  op.microbatch = labels.microbatch;
  op.chunk = labels.chunk;
  op.attrs = std::move(spec.attrs);
  op.flops = spec.flops;
  op.model_flops = spec.model_flops;
  double bytes = 0;
  for (const auto& t : spec.reads) bytes += static_cast<double>(t.bytes());
  for (const auto& t : spec.writes) bytes += static_cast<double>(t.bytes());
  op.bytes = spec.bytes >= 0 ? spec.bytes : bytes;

  for (OpId d : spec.extra_deps) add_dep(op, d);
  auto touch_alloc = [&](BufferId b) {
    BufferState& st = state_[b];
    if (st.freed) throw InternalError("GraphBuilder: op '" + op.full_name() + "' uses freed buffer '" + g_.buffers[b].name + "'");
    if (!st.allocated) {
      st.allocated = true;
      op.allocs.push_back(b);
    }
  };
  for (const auto& t : spec.reads) {
    touch_alloc(t.buffer);
    add_dep(op, state_[t.buffer].last_writer);
  }
  for (const auto& t : spec.writes) {
    touch_alloc(t.buffer);
    const BufferState& st = state_[t.buffer];
    add_dep(op, st.last_writer);
    for (OpId r : st.last_reader) add_dep(op, r);
  }
  std::sort(op.deps.begin(), op.deps.end());
  op.deps.erase(std::unique(op.deps.begin(), op.deps.end()), op.deps.end());

  const auto s = static_cast<size_t>(op.stream);
  for (const auto& t : spec.reads) state_[t.buffer].last_reader[s] = op.id;
  for (const auto& t : spec.writes) {
    BufferState& st = state_[t.buffer];
    st.last_writer = op.id;
    st.last_reader.fill(kNoOp);
  }
  op.reads = std::move(spec.reads);
  op.writes = std::move(spec.writes);
  g_.streams[s].push_back(op.id);
  g_.ops.push_back(std::move(op));
  return g_.ops.back().id;
}

void GraphBuilder::release(BufferId b) {
  BufferState& st = state_[b];
  if (st.freed || st.release_pending || !st.allocated || g_.buffers[b].resident)
    throw InternalError("GraphBuilder::release: buffer '" + g_.buffers[b].name + "' is not live");
  if (st.holds > 0) {
    st.release_pending = true;
    return;
  }
  free_after_last_use(b);
}

void GraphBuilder::hold(BufferId b) {
  BufferState& st = state_[b];
  if (st.freed || !st.allocated) throw InternalError("GraphBuilder::hold: buffer '" + g_.buffers[b].name + "' is not live");
  ++st.holds;
}

void GraphBuilder::unhold(BufferId b) {
  BufferState& st = state_[b];
  if (st.holds <= 0) throw InternalError("GraphBuilder::unhold: buffer '" + g_.buffers[b].name + "' is not held");
  if (--st.holds == 0 && st.release_pending) {
    st.release_pending = false;
    free_after_last_use(b);
  }
}

void GraphBuilder::free_after_last_use(BufferId b) {
  BufferState& st = state_[b];
  OpId last = st.last_writer;
  for (OpId r : st.last_reader)
    if (r != kNoOp && (last == kNoOp || r > last)) last = r;
  if (last == kNoOp) throw InternalError("GraphBuilder::release: buffer '" + g_.buffers[b].name + "' was never used");
  Op& op = g_.ops[last];
  add_dep(op, st.last_writer);
  for (OpId r : st.last_reader) add_dep(op, r);
  std::sort(op.deps.begin(), op.deps.end());
  op.deps.erase(std::unique(op.deps.begin(), op.deps.end()), op.deps.end());
  op.frees.push_back(b);
  st.freed = true;
}

void GraphBuilder::depend(OpId later, OpId earlier) {
  Op& op = g_.ops[later];
  if (earlier >= later) throw InternalError("GraphBuilder::depend: dependencies must point backwards");
  add_dep(op, earlier);
  std::sort(op.deps.begin(), op.deps.end());
  op.deps.erase(std::unique(op.deps.begin(), op.deps.end()), op.deps.end());
}

OpId GraphBuilder::last_op(Stream s) const {
  const auto& v = g_.streams[static_cast<size_t>(s)];
  return v.empty() ? kNoOp : v.back();
}

StepGraph GraphBuilder::finish() {
  for (size_t b = 0; b < state_.size(); ++b)
    if (!g_.buffers[b].resident && state_[b].allocated && !state_[b].freed)
      throw InternalError("GraphBuilder: activation/buffer '" + g_.buffers[b].name + "' is never freed");
  return std::move(g_);
}

}  // namespace paralab
