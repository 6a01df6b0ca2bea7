// paralab — cross-key validation of a scenario. Each rule names the key the user should change,
// where it was set, its value, and the values that would be accepted.
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "ir/enum_names.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/schedule.hpp"
#include "ir/validate_util.hpp"

namespace paralab {

SourceLoc Provenance::at(const std::string& key) const {
  if (auto it = locs_.find(key); it != locs_.end()) return it->second;
  return SourceLoc{default_file_, 0, 0};
}

int64_t ModelConfig::padded_vocab(int64_t tensor_parallel) const {
  const int64_t multiple = make_vocab_size_divisible_by * tensor_parallel;
  return (vocab_size + multiple - 1) / multiple * multiple;
}

namespace {

std::string sci(double x) {
  std::ostringstream os;
  os.precision(3);
  os << x;
  return os.str();
}


}  // namespace

// Checks that need no data-parallel size: model shape, tensor/pipeline/context splits,
// schedule, sequence, device support. They run first, so their errors name the real culprit.
void validate_model_and_splits(const Scenario& s) {
  const Checker c{s};
  const ModelConfig& m = s.model;
  const ParallelConfig& p = s.parallel;
  const TrainingConfig& t = s.training;

  // Model shape.
  c.divides("model.num_query_groups", m.num_query_groups, m.num_attention_heads,
            "num_attention_heads");
  // Tensor parallelism splits heads, query groups, the hidden and the FFN dimension
  // (Megatron column/row parallel linear layers, Shoeybi et al. 2019).
  c.divides("parallel.tensor", p.tensor, m.num_attention_heads, "num_attention_heads");
  c.divides("parallel.tensor", p.tensor, m.num_query_groups, "num_query_groups");
  c.divides("parallel.tensor", p.tensor, m.hidden_size, "hidden_size");
  c.divides("parallel.tensor", p.tensor, m.ffn_hidden_size, "ffn_hidden_size");
  if (m.max_position_embeddings < m.seq_length &&
      m.position_embedding_type == PositionEmbedding::learned_absolute)
    c.fail("model.max_position_embeddings", m.max_position_embeddings,
           "is smaller than seq_length (" + std::to_string(m.seq_length) + ")",
           ">= " + std::to_string(m.seq_length));

  validate_pipeline_split(s);
  // Sequence: context parallelism splits it, sequence parallelism splits each CP chunk over TP.
  c.divides("parallel.context", p.context, m.seq_length, "seq_length");
  // Megatron-LM's load-balanced causal split (docs/executor.md, "Context parallelism"): each
  // CP rank holds two of 2 x context equal chunks.
  if (p.context > 1 && m.seq_length % p.context == 0 && (m.seq_length / p.context) % 2 != 0)
    c.fail("parallel.context", p.context,
           "context parallelism cuts seq_length (" + std::to_string(m.seq_length) + ") into 2 x context = " +
               std::to_string(2 * p.context) + " equal chunks (two per CP rank, load-balanced), but it does not divide it",
           "context such that 2 x context divides seq_length");
  if (p.sequence_parallel && p.tensor > 1 && (m.seq_length / p.context) % p.tensor != 0)
    c.fail("parallel.tensor", p.tensor,
           "sequence parallelism splits each sequence chunk of " +
               std::to_string(m.seq_length / p.context) + " tokens over tensor ranks, but it does not divide it",
           "a divisor of " + std::to_string(m.seq_length / p.context) + ", or sequence_parallel = false");
  if (p.context > 1 && t.attention != AttentionImpl::flash)
    throw ConfigError(s.provenance.at("training.attention"), "training.attention", "\"unfused\"",
                      "context parallelism (ring attention) needs the fused attention kernel", "flash");

  // Sizes. The IR counts every tensor's elements and bytes in int64 and sums them per rank, so
  // no tensor may be beyond 2^44 elements (GPT-3's largest, its logits, has 2^27; unfused
  // attention scores at 128k tokens would have 2^41 per head group). Formed in floating point:
  // the products of schema-bounded keys can overflow int64 themselves.
  {
    constexpr double kMaxElements = 17592186044416.0;  // 2^44
    const auto d = [](int64_t x) { return static_cast<double>(x); };
    const double tokens = d(t.micro_batch_size) * d(m.seq_length);
    const double width = std::max({d(m.hidden_size), d(m.q_hidden()) + 2 * d(m.kv_hidden()), 2 * d(m.ffn_hidden_size),
                                   d(m.padded_vocab(1))});
    const double scores = t.attention == AttentionImpl::unfused
                              ? d(t.micro_batch_size) * d(m.num_attention_heads) * d(m.seq_length) * d(m.seq_length)
                              : 0.0;
    const double positions =
        m.position_embedding_type == PositionEmbedding::learned_absolute ? d(m.max_position_embeddings) : 0.0;
    const double weights = d(m.hidden_size) * std::max({d(m.padded_vocab(1)), positions,
                                                        2 * d(m.ffn_hidden_size), d(m.q_hidden()) + 2 * d(m.kv_hidden())});
    const auto too_big = [&](const char* key, int64_t value, const std::string& what, double elements,
                             const std::string& allowed) {
      if (elements > kMaxElements)
        c.fail(key, value,
               what + " = " + sci(elements) +
                   " elements in one tensor, more than paralab can account for (2^44)",
               allowed);
    };
    too_big("training.micro_batch_size", t.micro_batch_size,
            "micro_batch_size x seq_length x the widest activation (" + std::to_string(static_cast<int64_t>(width)) + ")",
            tokens * width, "a smaller micro_batch_size, seq_length or layer width");
    too_big("model.seq_length", m.seq_length, "unfused attention scores, micro_batch_size x heads x seq_length^2", scores,
            "a shorter seq_length, or training.attention = \"flash\"");
    too_big("model.hidden_size", m.hidden_size, "the largest weight matrix, hidden_size x its widest partner", weights,
            "a smaller hidden_size, vocab_size, ffn_hidden_size or max_position_embeddings");
  }

  // Device support for the precision.
  const MathMode math = gemm_math(t.precision);
  if (s.topology.device.peak(math) <= 0)
    throw ConfigError(s.provenance.at("training.precision"), "training.precision",
                      "\"" + std::string(to_string(t.precision)) + "\"",
                      "the device " + s.topology.device.name + " (" + s.topology.file.string() +
                          ") has no " + std::string(to_string(math)) + " peak",
                      "a precision the device supports");
}

// Checks that relate the layout to the cluster and the batch.
static void validate_world_and_batch(const Scenario& s) {
  const Checker c{s};
  const ParallelConfig& p = s.parallel;
  const TrainingConfig& t = s.training;

  // World size. Each degree is bounded by the schema but their product is not (65536^3 x 2^24
  // overflows int64), so it is formed with overflow checks.
  const int64_t devices = s.cluster.devices();
  int64_t world = p.tensor;
  const bool overflow = __builtin_mul_overflow(world, p.pipeline, &world) ||
                        __builtin_mul_overflow(world, p.context, &world) || __builtin_mul_overflow(world, p.data, &world);
  if (overflow || world != devices)
    c.fail("parallel.data", p.data,
           "tensor*pipeline*context*data = " + std::to_string(p.tensor) + "*" +
               std::to_string(p.pipeline) + "*" + std::to_string(p.context) + "*" +
               std::to_string(p.data) + " = " + (overflow ? std::string("more than 2^63") : std::to_string(world)) +
               " is not the cluster's " + std::to_string(devices) + " devices (" +
               std::to_string(s.cluster.nodes) + " nodes x " + std::to_string(s.cluster.devices_per_node) + ")",
           "a layout whose product is " + std::to_string(devices));

  // Several nodes need a network between them, and NICs to reach it.
  const Topology& topo = s.topology;
  if (s.cluster.nodes > 1 && (topo.network.kind == NetworkKind::none || topo.node.nics_per_node < 1))
    c.fail("cluster.nodes", s.cluster.nodes,
           "topology '" + topo.name + "' (" + topo.file.string() + ") has no network between nodes (" +
               (topo.network.kind == NetworkKind::none ? "network.kind = \"none\"" : "node.nics_per_node = 0") + ")",
           "1, or a topology with a [network] and NICs");

  // Batch.
  const int64_t per_step = t.micro_batch_size * p.data;
  if (t.global_batch_size % per_step != 0)
    c.fail("training.global_batch_size", t.global_batch_size,
           "is not divisible by micro_batch_size*data = " + std::to_string(t.micro_batch_size) + "*" +
               std::to_string(p.data) + " = " + std::to_string(per_step),
           "a multiple of " + std::to_string(per_step));
  const int64_t microbatches = t.global_batch_size / per_step;
  // Each schedule's own rule on chunks, stages and micro-batches (ir/schedule.cpp).
  const ScheduleParams sp{p.pipeline, 0, microbatches, p.virtual_pipeline_stages, p.microbatch_group_size_per_vp_stage};
  if (const ScheduleProblem why = schedule_info(p.schedule).rule(sp); !why.key.empty())
    throw ConfigError(s.provenance.at(why.key), why.key, why.value, why.problem, why.allowed);
}

// Optimizer and parameter offload (docs/offload.md): Megatron-LM's and DeepSpeed's preconditions,
// and a topology that describes the host side.
static void validate_offload(const Scenario& s) {
  const TrainingConfig& t = s.training;
  const ParallelConfig& p = s.parallel;
  const bool params = p.offload_param == OffloadParam::cpu;
  if (!t.optimizer_cpu_offload && !params) return;
  auto fail = [&](const std::string& key, const std::string& value, const std::string& problem,
                  const std::string& allowed) { throw ConfigError(s.provenance.at(key), key, value, problem, allowed); };
  if (t.optimizer_cpu_offload && p.zero_stage < 1)
    fail("training.optimizer_cpu_offload", "true",
         "needs the distributed optimizer (Megatron-LM's --optimizer-cpu-offload requires "
         "--use-distributed-optimizer), but parallel.zero_stage = 0",
         "parallel.zero_stage >= 1, or optimizer_cpu_offload = false");
  if (params && p.zero_stage < 3)
    fail("parallel.offload_param", "\"cpu\"",
         "parameters are offloaded only at ZeRO stage 3 (DeepSpeed's offload_param), but zero_stage = " +
             std::to_string(p.zero_stage),
         "\"none\", or parallel.zero_stage = 3");
  if (params && p.data * p.context < 2)
    fail("parallel.offload_param", "\"cpu\"",
         "ZeRO-3 shards parameters over the data-parallel group, and data x context = 1 here",
         "\"none\" (optimizer_cpu_offload alone), or data x context >= 2");
  if (params && (!t.optimizer_cpu_offload || t.optimizer_offload_fraction < 1.0))
    fail("parallel.offload_param", "\"cpu\"",
         "the updated parameters are written where they live, so the whole optimizer must be on the host",
         "training.optimizer_cpu_offload = true with optimizer_offload_fraction = 1, or \"none\"");
  const Topology& topo = s.topology;
  if (topo.device.kind != DeviceKind::gpu || !topo.host.described())
    fail(t.optimizer_cpu_offload ? "training.optimizer_cpu_offload" : "parallel.offload_param",
         t.optimizer_cpu_offload ? "true" : "\"cpu\"",
         "topology '" + topo.name + "' (" + topo.file.string() + ") " +
             (topo.device.kind != DeviceKind::gpu ? "is a CPU host: there is no device memory to offload from"
                                                  : "has no complete [host] section (host.memory_gib, mem_bw_gbps, cores and link_bw_gbps, all > 0)"),
         "a GPU topology with a [host] section, or no offload");
}

// nn.DataParallel (docs/dataparallel.md): one process, one node, data parallelism alone, one
// batch per step, as torch.nn.DataParallel runs.
static void validate_dataparallel(const Scenario& s) {
  const ParallelConfig& p = s.parallel;
  if (p.data_parallel_impl != DataParallelImpl::dataparallel) return;
  auto fail = [&](const std::string& why, const std::string& allowed) {
    throw ConfigError(s.provenance.at("parallel.data_parallel_impl"), "parallel.data_parallel_impl", "\"dataparallel\"",
                      why, allowed);
  };
  const std::string ddp = "\"ddp\"";
  if (s.topology.device.kind != DeviceKind::gpu) fail("nn.DataParallel drives GPUs; topology '" + s.topology.name + "' is a CPU host", ddp);
  if (s.cluster.nodes != 1)
    fail("one process drives the GPUs of one machine, but cluster.nodes = " + std::to_string(s.cluster.nodes),
         ddp + ", or cluster.nodes = 1");
  if (p.tensor != 1 || p.pipeline != 1 || p.context != 1)
    fail("it replicates the whole model on every GPU: tensor, pipeline and context must be 1 (here " +
             std::to_string(p.tensor) + ", " + std::to_string(p.pipeline) + ", " + std::to_string(p.context) + ")",
         ddp + ", or tensor = pipeline = context = 1");
  if (p.zero_stage != 0 || s.training.optimizer_cpu_offload)
    fail("the optimizer runs on device 0 over the whole model: no ZeRO sharding, no offload", ddp + ", or zero_stage = 0 without offload");
  if (s.num_microbatches() != 1)
    fail("each step is one batch split over the GPUs, but global_batch_size / (micro_batch_size x data) = " +
             std::to_string(s.num_microbatches()),
         ddp + ", or global_batch_size = micro_batch_size x data");
}

void validate_scenario(const Scenario& s) {
  validate_model_and_splits(s);
  validate_world_and_batch(s);
  validate_offload(s);
  validate_dataparallel(s);
  validate_moe(s);
}

}  // namespace paralab
