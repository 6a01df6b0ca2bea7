// paralab — builds one StepGraph op by op. Dependencies are inferred from dataflow: an op
// depends on the last writer of every buffer it reads (RAW) and on the last writer and the
// last readers of every buffer it writes (WAR/WAW); dependencies on ops of the same stream are
// dropped because stream order already implies them. Buffers are allocated by their first op
// and freed after the op `release` names, so memory events follow the graph by construction.
#pragma once

#include <string>
#include <vector>

#include "ir/step_graph.hpp"

namespace paralab {

// Labels every op carries (for reports and traces); set by the builder's callers.
struct OpLabels {
  Phase phase = Phase::forward;
  int32_t layer = -1;
  int32_t microbatch = -1;
  int16_t chunk = 0;
};

struct OpSpec {
  OpKind kind = OpKind::gemm;
  Stream stream = Stream::compute;
  const char* name = "";
  std::vector<TensorRef> reads, writes;
  OpAttrs attrs;
  double flops = 0;
  double model_flops = 0;
  double bytes = -1;           // < 0: reads + writes
  std::vector<OpId> extra_deps;
};

class GraphBuilder {
 public:
  explicit GraphBuilder(int64_t stage);

  BufferId buffer(std::string name, int64_t elements, DType dtype, MemCategory category,
                  bool resident = false, int64_t params = 0);
  // A resident buffer in the host's pinned memory (optimizer offload, docs/offload.md).
  BufferId host_buffer(std::string name, int64_t elements, DType dtype, MemCategory category, int64_t params = 0);
  [[nodiscard]] TensorRef view(BufferId b, std::initializer_list<int64_t> shape, int64_t offset = 0) const;
  [[nodiscard]] TensorRef whole(BufferId b) const;
  [[nodiscard]] const Buffer& buf(BufferId b) const { return g_.buffers[b]; }

  OpId add(OpSpec spec);
  // Frees `b` after its last user so far (which then also waits for users on other streams).
  // While `b` is held, the release waits for the last unhold (a deferred W still reads it).
  void release(BufferId b);
  void hold(BufferId b);
  void unhold(BufferId b);
  // An extra dependency added after the fact (`later` waits for `earlier`).
  void depend(OpId later, OpId earlier);

  // nn.DataParallel: one host thread launches every forward (and recompute) op on `gpus` GPUs
  // in turn; each such op then waits for a `launch` op on Stream::host (docs/dataparallel.md).
  void launch_from_one_thread(int64_t gpus) { launch_gpus_ = gpus; }

  OpLabels labels;  // applied to every op added
  [[nodiscard]] const Op& op(OpId id) const { return g_.ops[id]; }
  [[nodiscard]] OpId last_op(Stream s) const;
  [[nodiscard]] size_t size() const { return g_.ops.size(); }
  uint32_t next_tag() { return next_tag_++; }

  StepGraph finish();

 private:
  struct BufferState {
    OpId last_writer = kNoOp;
    std::array<OpId, kStreams> last_reader{};
    bool allocated = false;
    bool freed = false;
    bool release_pending = false;  // released while held
    int32_t holds = 0;
  };
  void free_after_last_use(BufferId b);
  void add_dep(Op& op, OpId dep) const;

  StepGraph g_;
  std::vector<BufferState> state_;
  uint32_t next_tag_ = 1u << 31;
  int64_t launch_gpus_ = 0;  // automatic tags stay clear of the fixed and p2p ones (< 2^31)
};

}  // namespace paralab
