// paralab — what `paralab inspect` reports, computed from the IR alone: parameters, model and
// hardware FLOPs, communication volume by group kind, and memory per rank (resident model
// state plus the peak of activations and buffers over a replay of the graph's memory events).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "ir/step_ir.hpp"

namespace paralab {

// Group kinds as reported: tp, cp, dp, pp; "other" joins stages (tied embeddings, loss-scale
// and gradient-norm reductions).
enum class CommClass : uint8_t { tp, cp, dp, pp, other, kCount };
constexpr int kCommClasses = static_cast<int>(CommClass::kCount);
std::string_view to_string(CommClass c);
CommClass comm_class(GroupKind g);

struct MemoryBreakdown {
  std::array<double, kMemCategories> resident{};  // bytes held for the whole step
  std::array<double, kMemCategories> at_peak{};   // transient bytes at the peak moment
  double peak_transient = 0;                      // max over the step of activations + buffers
  double peak_activations = 0;                    // max over the step of activations alone
  OpId peak_op = 0;                               // the op during which the peak occurs
  double host_resident = 0;                       // bytes in the host's pinned memory (offload)
  [[nodiscard]] double resident_total() const;    // device only
  [[nodiscard]] double peak_total() const { return resident_total() + peak_transient; }
};

// Replays allocate/free events in op order (a topological order close to program order).
MemoryBreakdown replay_memory(const StepGraph& g);

struct StageSummary {
  int64_t stage = 0;
  int64_t representative_rank = 0;
  int64_t ranks = 0;             // ranks that run this graph
  int64_t params = 0;            // parameters of the model replica one rank holds
  int64_t params_stored = 0;     // parameters one rank stores (params / dp*cp under ZeRO-3)
  int64_t ops = 0;
  double model_flops = 0, hardware_flops = 0;  // per rank
  std::array<double, kCommClasses> comm_bytes{};  // sent per rank per step
  MemoryBreakdown memory;
};

struct StepSummary {
  int64_t world_size = 0;
  int64_t parameters_total = 0;
  int64_t tokens_per_step = 0;
  double model_flops_per_step = 0;     // Korthikanti et al. 2022 Eq. 7 (generalized to GQA/SwiGLU)
  double hardware_flops_per_step = 0;  // including recomputation
  double peak_memory_bytes = 0;        // max over ranks
  double memory_capacity_bytes = 0;
  bool fits_in_memory = true;
  // Offload: pinned host memory of one node's ranks (the largest stage's per rank x the node's
  // devices) against the topology's host.memory_gib.
  double host_memory_bytes_per_node = 0;
  double host_memory_capacity_bytes = 0;
  bool fits_in_host_memory = true;
  std::vector<StageSummary> stages;
};

StepSummary summarize(const StepIR& ir);

// Just the FLOPs of a step (model, hardware), summed over all ranks: one pass over the ops.
struct StepFlops {
  double model = 0, hardware = 0;
};
StepFlops step_flops(const StepIR& ir);

}  // namespace paralab
