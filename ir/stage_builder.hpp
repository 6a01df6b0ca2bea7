// paralab — builds one pipeline stage's StepGraph: walks the stage's pipeline schedule and
// emits, per task, the pipeline transfers, the embedding, the transformer layers (Megatron's
// tensor/sequence/context parallel structure, recomputation) and the head with its
// vocabulary-parallel loss; the ParamStore adds the data-parallel strategy and optimizer.
// Internal to ir/ (the public entry point is ir/step_ir.hpp).
#pragma once

#include <functional>
#include <map>
#include <vector>

#include "ir/graph_builder.hpp"
#include "ir/model_shape.hpp"
#include "ir/param_store.hpp"
#include "ir/partition.hpp"
#include "ir/schedule.hpp"

namespace paralab {

constexpr BufferId kNoBuffer = UINT32_MAX;

// What a layer's forward pass keeps for its backward pass (kNoBuffer when not kept).
struct LayerActs {
  BufferId x = kNoBuffer;  // input (residual stream); owned by the previous layer / transfer
  BufferId ln1 = kNoBuffer, ln1_stats = kNoBuffer, qkv = kNoBuffer;
  BufferId probs = kNoBuffer, attn_mask = kNoBuffer, attn_drop = kNoBuffer;  // unfused attention
  BufferId lse = kNoBuffer;  // fused attention log-sum-exp
  BufferId ctx = kNoBuffer, mask1 = kNoBuffer, h1 = kNoBuffer;
  BufferId ln2 = kNoBuffer, ln2_stats = kNoBuffer, fc1 = kNoBuffer, act = kNoBuffer, mask2 = kNoBuffer;
  BufferId out = kNoBuffer;  // output (next layer's x)
};

struct EmbeddingActs {
  BufferId ids = kNoBuffer, mask = kNoBuffer, out = kNoBuffer;
};

struct HeadActs {
  BufferId x = kNoBuffer, lnf = kNoBuffer, stats = kNoBuffer, probs = kNoBuffer, sums = kNoBuffer,
           labels = kNoBuffer, loss = kNoBuffer;
};

class StageBuilder {
 public:
  StageBuilder(const Scenario& s, int64_t stage);
  StepGraph build();

 private:
  // Per (micro-batch, chunk): what the forward pass left for the backward pass.
  struct TaskActs {
    EmbeddingActs emb;
    std::vector<LayerActs> layers;
    HeadActs head;
  };

  void run_forward(const PipelineTask& t, const ChunkSpec& c);
  void run_backward(const PipelineTask& t, const ChunkSpec& c);
  void run_weight_grad(const PipelineTask& t);

  // layer_ops.cpp
  LayerActs layer_forward(int64_t layer, BufferId x, Recompute policy, bool recomputing);
  void recompute_attention_core(int64_t layer, LayerActs& a);
  void layer_backward(int64_t layer, LayerActs& a, BufferId dy);
  BufferId attention_forward(int64_t layer, LayerActs& a, bool keep_core);
  void attention_backward(int64_t layer, LayerActs& a, BufferId d_ctx, BufferId d_qkv);

  // embedding_head.cpp
  EmbeddingActs embedding_forward();
  void embedding_backward(EmbeddingActs& e, BufferId dy);
  HeadActs head_forward(BufferId x);
  BufferId head_backward(HeadActs& h);

  // nn.DataParallel (dataparallel_ops.cpp): device 0's scatter of a batch and gather of outputs.
  [[nodiscard]] bool dataparallel() const;
  [[nodiscard]] int64_t dp_rows(int64_t rows) const;  // rows of the whole batch on device 0
  void dp_collective(const char* name, CollKind kind, BufferId in, BufferId out);
  void dp_scatter(const char* name, BufferId all, BufferId local);
  BufferId dp_gather(const char* name, BufferId local);

  // pipeline transfers (stage_builder.cpp)
  BufferId receive(const PipelineTask& t, const ChunkSpec& c, bool activation);
  void send(const PipelineTask& t, const ChunkSpec& c, BufferId what, bool activation);
  // Megatron's scatter/gather of pipeline transfers applies (see stage_builder.cpp).
  [[nodiscard]] bool pipeline_scatter_gather() const;

  // op helpers (op_helpers.cpp)
  BufferId act_buffer(const char* name, int64_t rows, int64_t cols, DType dtype, MemCategory cat = MemCategory::activations);
  OpId linear(const char* name, GemmRole role, TensorRef a, TensorRef w, TensorRef c, int64_t m,
              int64_t n, int64_t k, bool trans_a, bool trans_b, bool accumulate,
              const TensorRef* bias = nullptr, const TensorRef* bias_grad = nullptr);
  OpId kernel(OpKind kind, const char* name, std::vector<TensorRef> reads, std::vector<TensorRef> writes,
              KernelAttrs attrs, double flops_per_element = 1.0);
  BufferId tp_all_gather(const char* name, BufferId in,      // [T/t, h] -> [T, h]
                         MemCategory cat = MemCategory::buffers);
  BufferId tp_reduce_scatter(const char* name, BufferId in); // [T, c] -> [T/t, c]
  void tp_all_reduce(const char* name, BufferId buf, ReduceOp op = ReduceOp::sum);
  // Sequence-parallel regions: gather/scatter with SP, all-reduce without (Megatron's f/g).
  BufferId tp_enter(const char* name, BufferId in);           // SP: all-gather; else identity
  BufferId tp_exit(const char* name, BufferId partial);       // SP: reduce-scatter; else all-reduce
  // A column-parallel input gradient's reduction and the layer's weight-gradient GEMM (emitted
  // by `wgrad`, returns its op): overlapped (async_tensor_model_parallel_allreduce, sequence
  // parallelism), or the reduction after the GEMM with compute waiting (Megatron 2021).
  BufferId dgrad_reduce_and_wgrad(const char* reduce, BufferId d_in, std::vector<BufferId> reads,
                                  std::function<OpId()> wgrad);
  // A weight-gradient GEMM (and its grad_done): emitted now, or, during a B task of a
  // zero-bubble schedule, deferred to the task's W with the buffers it `reads` held till then.
  void weight_grad(std::vector<BufferId> reads, std::function<OpId()> emit);
  [[nodiscard]] bool deferring_weight_grads() const { return defer_ != nullptr; }
  [[nodiscard]] double model_part(double flops) const;       // 0 while recomputing
  void release_if(BufferId& b);

  const Scenario& s_;
  int64_t stage_;
  ModelShape m_;
  std::vector<ChunkSpec> chunks_;
  int64_t microbatches_;
  GraphBuilder b_;
  ParamStore store_;
  std::map<std::pair<int32_t, int16_t>, TaskActs> acts_;
  std::map<std::pair<int32_t, int16_t>, BufferId> grads_in_;  // received / head-made dy per task
  OpId last_task_op_ = kNoOp;  // last compute op of the previous task (throttles receives)
  // W passes waiting per (micro-batch, chunk), in the order their B emitted them.
  std::map<std::pair<int32_t, int16_t>, std::vector<std::function<void()>>> pending_w_;
  std::vector<std::function<void()>>* defer_ = nullptr;  // set during a B task
};

}  // namespace paralab
