// paralab — a stage's parameters, gradients and optimizer state as buffers, and the data-
// parallel strategy that keeps them in sync: DDP (bucketed all-reduce overlapped with the
// last micro-batch's backward), ZeRO-1/2 (reduce-scatter, sharded optimizer, all-gather of
// updated parameters) and ZeRO-3/FSDP (sharded parameters gathered per layer, gradients
// reduce-scattered per layer and micro-batch). Rajbhandari et al. 2020 (ZeRO), Sec. 5;
// Li et al. 2020 (PyTorch DDP) for bucketing; Zhao et al. 2023 (FSDP) for prefetching.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph_builder.hpp"
#include "ir/model_shape.hpp"
#include "ir/partition.hpp"

namespace paralab {

class ParamStore {
 public:
  ParamStore(GraphBuilder& b, const Scenario& s, const ModelShape& m,
             const std::vector<ChunkSpec>& chunks, int64_t microbatches);

  // Units: one per layer, plus the embedding and the head of the chunks that hold them.
  [[nodiscard]] int layer_unit(int64_t layer) const;
  [[nodiscard]] int embedding_unit() const { return embedding_unit_; }
  [[nodiscard]] int head_unit() const { return head_unit_; }
  [[nodiscard]] bool has(int unit, ParamRole r) const;

  // The view an op reads a parameter through (ZeRO-3: the unit must be gathered).
  TensorRef weight(int unit, ParamRole r);
  // The view a weight-gradient op accumulates into (ZeRO-2/3: a per-micro-batch buffer).
  TensorRef grad(int unit, ParamRole r);
  // A parameter's gradient for `microbatch` is complete; reductions start when a bucket is.
  void grad_done(int unit, ParamRole r);

  // ZeRO-3: all-gather a unit's parameters (issued after `after` to bound prefetching) and
  // free them after their last use. No-ops otherwise.
  void gather(int unit, OpId after);
  void release_gathered(int unit);
  [[nodiscard]] bool gathers() const { return shard_weights_; }

  void begin_step();  // overlapped parameter all-gathers (ZeRO-1/2)
  void end_step();    // pending reductions, tied embeddings, loss scaling, clipping, optimizer

  [[nodiscard]] int64_t local_params() const { return local_params_; }

 private:
  struct Slot {
    ParamSpec spec;
    int unit = 0;
    int bucket = 0;
    int64_t offset = 0;  // elements into the bucket
  };
  struct Unit {
    int32_t layer = 0;
    int16_t chunk = 0;
    std::array<int, kParamRoles> slot;
    std::vector<int> buckets;  // the buckets holding this unit's parameters
  };
  struct Bucket {
    std::vector<int> slots;
    int16_t chunk = 0;
    int64_t used = 0, elements = 0, shard = 0;
    BufferId weights = 0, grads = 0, master = 0, state1 = 0, state2 = 0;
    bool has_master = false, has_state2 = false;
    BufferId transient = 0;  // ZeRO-2/3 full gradient of the current micro-batch
    bool transient_live = false;
    BufferId gathered = 0;   // ZeRO-3: the all-gathered parameters while in use
    bool gathered_live = false;
    int remaining = 0;
    int64_t cycles = 0;      // completed rounds of every slot's gradient (one per micro-batch)
    bool reduced = false;    // ZeRO-0/1: reduction emitted
    // Optimizer offload (param_offload.cpp): the first host_n elements of this rank's shard are
    // stepped on the host from these pinned buffers; the rest on the device as before.
    int64_t host_n = 0;
    BufferId h_grad = 0, h_param = 0, h_master = 0, h_state1 = 0, h_state2 = 0;
  };

  void layout_buckets();
  void create_buffers();
  void reduce(int bucket);
  TensorRef grad_target(const Bucket& bk) const;  // post-reduction gradient this rank updates with
  TensorRef weight_target(const Bucket& bk) const;
  void all_gather_weights(int bucket);
  void emit_tied_embedding_reduce();
  // param_offload.cpp: the optimizer step of every bucket, on the device and, offloaded, on the
  // host with its copies; `found_inf` / `norm` are the device scalars (fp16, clipping).
  void create_optimizer_buffers(Bucket& bk, const std::string& name, int64_t n, bool mixed, bool adam);
  void emit_optimizer(std::optional<BufferId> found_inf, std::optional<BufferId> norm);
  OpSpec step_spec(TensorRef g, TensorRef w, std::optional<BufferId> master, BufferId s1, std::optional<BufferId> s2,
                   std::vector<std::optional<BufferId>> flags) const;
  OpId copy(const char* name, Stream s, TensorRef from, TensorRef to);
  void emit_replicated_grad_reduce();
  OpId collective(const char* name, CollKind kind, GroupKind group, ReduceOp op,
                  std::vector<TensorRef> reads, std::vector<TensorRef> writes, int64_t bytes,
                  uint32_t tag);

  GraphBuilder& b_;
  const Scenario& s_;
  const ModelShape& m_;
  int64_t microbatches_;
  int64_t dp_size_;  // gradient-reduction group size (dp * cp)
  bool shard_opt_ = false, shard_grads_ = false, shard_weights_ = false;
  bool offload_opt_ = false, offload_params_ = false;  // docs/offload.md
  bool dataparallel_ = false;  // nn.DataParallel: broadcast from and reduce onto device 0
  DType grad_dtype_ = DType::bf16;
  std::vector<Unit> units_;
  std::vector<Slot> slots_;
  std::vector<Bucket> buckets_;
  std::vector<int> layer_units_;  // global layer -> unit, -1 when not on this stage
  int embedding_unit_ = -1, head_unit_ = -1;
  int64_t local_params_ = 0;
};

}  // namespace paralab
