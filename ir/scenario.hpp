// paralab — a scenario: the model, the training recipe, the parallel layout and the cluster.
// Loaded once at the edge (ir/scenario_loader.hpp) into these validated structs; nothing
// downstream looks keys up by string. Key names follow Megatron-LM's arguments.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "ir/dtype.hpp"
#include "ir/error.hpp"
#include "ir/moe_config.hpp"
#include "ir/pipeline_layout.hpp"
#include "ir/topology.hpp"
#include "ir/variation.hpp"

namespace paralab {

enum class Activation : uint8_t { gelu, swiglu };
enum class Normalization : uint8_t { layernorm, rmsnorm };
enum class PositionEmbedding : uint8_t { learned_absolute, rope };
enum class Optimizer : uint8_t { adam, sgd };
enum class Recompute : uint8_t { none, selective, full };
enum class AttentionImpl : uint8_t { flash, unfused };
enum class Schedule : uint8_t { gpipe, one_f_one_b, interleaved, zb_h1, zb_h2 };
enum class CollectiveAlgo : uint8_t { automatic, ring, tree, hierarchical };
enum class OffloadParam : uint8_t { none, cpu };
enum class DataParallelImpl : uint8_t { ddp, dataparallel };

// [model]: a decoder-only transformer (GPT or Llama family).
struct ModelConfig {
  std::string preset;             // preset it started from, empty if none
  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  int64_t num_attention_heads = 0;
  int64_t num_query_groups = 0;   // == heads for multi-head attention, < heads for GQA
  int64_t kv_channels = 0;        // head dimension; hidden_size / heads unless set
  int64_t ffn_hidden_size = 0;
  int64_t vocab_size = 0;         // as given; padded_vocab() applies Megatron's padding
  int64_t make_vocab_size_divisible_by = 128;
  int64_t seq_length = 0;
  int64_t max_position_embeddings = 0;  // learned positions table size (= seq_length unless set)
  Activation activation = Activation::gelu;
  Normalization normalization = Normalization::layernorm;
  PositionEmbedding position_embedding_type = PositionEmbedding::learned_absolute;
  bool untie_embeddings = false;  // Megatron: untie_embeddings_and_output_weights
  bool add_bias_linear = true;
  double hidden_dropout = 0.1;
  double attention_dropout = 0.1;
  double norm_epsilon = 1e-5;
  double rotary_base = 10000.0;
  MoEConfig moe;  // experts, router, MTP (ir/moe_config.hpp); keys are [model]'s
  MLAConfig mla;  // multi-head latent attention

  // Megatron pads the vocabulary to a multiple of make_vocab_size_divisible_by * tp
  // (megatron/training/tokenizer: _vocab_size_with_padding).
  [[nodiscard]] int64_t padded_vocab(int64_t tensor_parallel) const;
  [[nodiscard]] int64_t kv_hidden() const { return num_query_groups * kv_channels; }
  [[nodiscard]] int64_t q_hidden() const { return num_attention_heads * kv_channels; }
};

// [training]: batch, precision, optimizer, recomputation.
struct TrainingConfig {
  int64_t global_batch_size = 0;
  int64_t micro_batch_size = 1;
  Precision precision = Precision::bf16;
  Optimizer optimizer = Optimizer::adam;
  Recompute recompute = Recompute::none;
  AttentionImpl attention = AttentionImpl::flash;
  double lr = 1e-4;
  double weight_decay = 0.01;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.95;
  double adam_eps = 1e-8;
  double sgd_momentum = 0.9;
  double clip_grad = 1.0;               // 0 disables gradient clipping
  double initial_loss_scale = 65536.0;  // fp16 dynamic loss scaling (seed 000: 2^16)
  int64_t loss_scale_window = 2000;     // growth interval (seed 000)
  int64_t seed = 1234;
  // Megatron-LM's --no-gradient-accumulation-fusion (false): each linear layer's weight-gradient
  // GEMM writes a fresh gradient tensor and a separate kernel adds it into the main gradient
  // buffer every micro-batch (Megatron before late 2021: `main_grad.add_(grad)` in the DDP hook).
  // True: the GEMM accumulates into the main gradient (fused_weight_gradient_mlp_cuda).
  bool gradient_accumulation_fusion = true;
  // Megatron-LM's --accumulate-allreduce-grads-in-fp32: the gradient buffers (accumulation and
  // the data-parallel reduction) are fp32 instead of the parameters' dtype. Megatron turns it on
  // for bf16 by itself; here it is explicit (default off: gradients in the parameters' dtype).
  bool accumulate_allreduce_grads_in_fp32 = false;
  // Megatron-LM's --optimizer-cpu-offload (HybridDeviceOptimizer; docs/offload.md): this
  // fraction of each rank's optimizer shard (fp32 master and moments) lives in host memory and
  // is stepped by the host's cores; its gradients are copied device-to-host and its updated
  // parameters host-to-device. Needs the distributed optimizer (zero_stage >= 1).
  bool optimizer_cpu_offload = false;
  double optimizer_offload_fraction = 1.0;
  // --overlap-cpu-optimizer-d2h-h2d: each bucket's copies and host step start as soon as its
  // gradients are ready, pipelined; off, all gradients are copied, then all stepped, then all
  // parameters copied back.
  bool overlap_cpu_optimizer_d2h_h2d = false;
};

// [parallel]: the layout. tensor*pipeline*context*data == cluster GPUs.
struct ParallelConfig {
  int64_t tensor = 1;
  int64_t pipeline = 1;
  int64_t context = 1;
  int64_t data = 0;  // 0 until inferred from the cluster's GPU count
  // Expert layers fold onto the same ranks (Megatron's parallel folding, docs/ir.md): expert
  // parallel size and expert tensor parallel size (0: the tensor size, Megatron's default);
  // the expert data-parallel size is tensor*context*data / (expert*expert_tensor).
  int64_t expert = 1;
  int64_t expert_tensor = 0;
  bool sequence_parallel = false;
  int64_t virtual_pipeline_stages = 1;
  // Megatron-LM's microbatch_group_size_per_vp_stage: the interleaved schedule runs this many
  // micro-batches on a chunk before moving to the next (0: the pipeline size, Megatron's default).
  int64_t microbatch_group_size_per_vp_stage = 0;
  Schedule schedule = Schedule::one_f_one_b;
  int64_t zero_stage = 0;
  // DeepSpeed's offload_param (ZeRO-3 only): parameter shards live in host memory and are
  // copied to the device before each all-gather (Rajbhandari et al. 2021, ZeRO-Infinity).
  OffloadParam offload_param = OffloadParam::none;
  // ddp: one process per GPU, gradients all-reduced (PyTorch DDP, Li et al. 2020). dataparallel:
  // PyTorch's nn.DataParallel, one process driving every GPU of a node from one thread (docs/
  // dataparallel.md): simulated only, as the seed notes' counter-example.
  DataParallelImpl data_parallel_impl = DataParallelImpl::ddp;
  // Gradient bucket size; 0 (the default) = Megatron-LM's rule, max(40M, 1M x data) parameters
  // (megatron/core/distributed: bucket_size), rather than PyTorch DDP's 25 MB.
  double dp_bucket_mb = 0.0;
  bool overlap_grad_reduce = true;
  bool overlap_param_gather = true;
  // Megatron (Narayanan et al. 2021 Sec. 4.1): without sequence parallelism, send 1/t of a
  // stage boundary tensor per TP rank over the network and all-gather it over NVLink.
  bool scatter_gather_tensors_in_pipeline = true;
  // Megatron-LM's async_tensor_model_parallel_allreduce (--no-async-tensor-model-parallel-
  // allreduce turns it off). On: in the backward pass of a column-parallel linear without
  // sequence parallelism, the input-gradient all-reduce runs while the weight-gradient GEMM
  // computes. Off (Megatron 2021): autograd all-reduces the input gradient after both GEMMs, and
  // compute waits for it. With sequence parallelism the reduce-scatter always overlaps.
  bool async_tensor_model_parallel_allreduce = true;
  // Uneven pipelines (Megatron-LM's decoder_first/last_pipeline_num_layers): the first and/or
  // last stage hold this many layers, the rest split evenly. 0 = even split. Llama 3 405B was
  // trained with one layer fewer on the first and last of 16 stages (Llama 3 paper, Sec. 3.3).
  int64_t decoder_first_pipeline_num_layers = 0;
  int64_t decoder_last_pipeline_num_layers = 0;
  // Megatron-LM's account_for_embedding/loss_in_pipeline_split: the embedding (loss) counts as
  // one layer of the first (last) virtual stage when the layers are split, so 126 layers + 2 go
  // 16 per stage on 8 stages, the first and last holding 15 transformer layers.
  bool account_for_embedding_in_pipeline_split = false;
  bool account_for_loss_in_pipeline_split = false;
  // Megatron-LM's pipeline_model_parallel_layout (ir/pipeline_layout.hpp): every virtual stage's
  // layers; sets virtual_pipeline_stages to its stage count / pipeline. Empty: not given.
  std::string pipeline_model_parallel_layout;
  std::vector<VirtualStageLayers> pipeline_layout;  // parsed at load

  [[nodiscard]] int64_t world() const { return tensor * pipeline * context * data; }
  [[nodiscard]] int64_t expert_tensor_size() const { return expert_tensor > 0 ? expert_tensor : tensor; }
  // Bytes of gradients per bucket (see dp_bucket_mb).
  [[nodiscard]] double bucket_bytes(int64_t grad_bytes_per_param) const {
    if (dp_bucket_mb > 0) return dp_bucket_mb * 1048576.0;
    const double params = std::max(40e6, 1e6 * static_cast<double>(data * context));
    return params * static_cast<double>(grad_bytes_per_param);
  }
  [[nodiscard]] int64_t num_microbatches(int64_t global_batch, int64_t micro_batch) const {
    return global_batch / (micro_batch * data);
  }
};

// [cluster]: which hardware, how many nodes.
struct ClusterConfig {
  std::string topology;  // name in topologies/ or a path
  int64_t nodes = 1;
  int64_t devices_per_node = 0;  // the topology's unless set (e.g. 2 ranks on a 4-core host)

  [[nodiscard]] int64_t devices() const { return nodes * devices_per_node; }
};

// [simulation]: knobs of the simulator that are not part of the layout.
struct SimulationConfig {
  CollectiveAlgo collective_algorithm = CollectiveAlgo::automatic;
  // Per-rank mode: each tensor-parallel group runs at its slowest member's speed, as one class
  // (docs/simulator.md, "Per-rank mode"): 1/tensor as many simulated ranks. Exact when every
  // rank's slowdown is the same for all its ops (gpu_speed_cv, whole-rank stragglers) and the
  // group synchronizes between them, which its per-layer collectives do; otherwise an upper bound.
  bool pace_tensor_groups = false;
};

// [reliability]: what interrupts a long run and what recovering costs (docs/goodput.md). Rates
// are job-interrupting failures per day; the defaults are Meta's RSC-1 cluster (Kokolis et al.,
// "Revisiting Reliability in Large-Scale Machine Learning Research Clusters", HPCA 2025:
// 6.50 failures per 1,000 node-days) and Llama 3's storage (Llama Team, "The Llama 3 Herd of
// Models", 2024, Sec. 3.3.1: 2 TB/s sustained). restart_s (detection, rescheduling, start-up,
// before reading the checkpoint) has no published figure; 10 minutes is an assumption.
struct ReliabilityConfig {
  double gpu_failures_per_day = 0;       // per GPU, beside the node rate
  double node_failures_per_day = 6.5e-3; // per node (host)
  double checkpoint_write_gbps = 2000;   // the job's aggregate write bandwidth to storage
  double checkpoint_read_gbps = 2000;    // and read bandwidth on restart
  double restart_s = 600;
  double checkpoint_interval_s = 0;      // compute time between checkpoints; 0: Daly's optimum
};

// Where every key's value came from, for error messages after loading ("section.key").
class Provenance {
 public:
  void set(const std::string& key, SourceLoc loc) { locs_[key] = std::move(loc); }
  [[nodiscard]] SourceLoc at(const std::string& key) const;
  [[nodiscard]] bool has(const std::string& key) const { return locs_.count(key) > 0; }
  void set_default_file(std::string file) { default_file_ = std::move(file); }

 private:
  std::map<std::string, SourceLoc> locs_;
  std::string default_file_;
};

struct Scenario {
  std::string name;  // file stem
  std::filesystem::path file;
  ModelConfig model;
  TrainingConfig training;
  ParallelConfig parallel;
  ClusterConfig cluster;
  SimulationConfig simulation;
  ReliabilityConfig reliability;
  VariationConfig variation;  // how ranks differ (empty: all alike)
  Topology topology;  // resolved from cluster.topology
  Provenance provenance;

  [[nodiscard]] int64_t world_size() const { return parallel.world(); }
  [[nodiscard]] int64_t num_microbatches() const {
    return parallel.num_microbatches(training.global_batch_size, training.micro_batch_size);
  }
  [[nodiscard]] int64_t tokens_per_step() const {
    return training.global_batch_size * model.seq_length;
  }
};

std::string_view to_string(Activation v);
std::string_view to_string(Normalization v);
std::string_view to_string(PositionEmbedding v);
std::string_view to_string(Optimizer v);
std::string_view to_string(Recompute v);
std::string_view to_string(AttentionImpl v);
std::string_view to_string(Schedule v);
std::string_view to_string(CollectiveAlgo v);
std::string_view to_string(OffloadParam v);
std::string_view to_string(DataParallelImpl v);

}  // namespace paralab
