// paralab — pipeline schedules: the order in which one stage runs the forward and backward
// passes of its micro-batches and model chunks. One file per schedule, one registry row each.
// Notation of Qi et al. (ICLR 2024): F forward, B input gradient, W weight gradient.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/scenario.hpp"

namespace paralab {

// What one task runs: F, the whole backward (B and W together, as 1F1B does), or the backward
// split in two: B (input gradients, on the critical path) and W (weight gradients, deferrable).
enum class TaskKind : uint8_t { forward, backward, input_grad, weight_grad };

struct PipelineTask {
  TaskKind kind = TaskKind::forward;
  int32_t microbatch = 0;
  int16_t chunk = 0;  // model chunk on this stage (0 unless the schedule has several)
  [[nodiscard]] bool forward() const { return kind == TaskKind::forward; }
  bool operator==(const PipelineTask&) const = default;
};

struct ScheduleParams {
  int64_t stages = 1;        // p
  int64_t stage = 0;         // this stage
  int64_t microbatches = 1;  // m
  int64_t chunks = 1;        // v (model chunks per stage)
  // Interleaving: micro-batches a chunk runs before the next chunk (Megatron-LM's
  // microbatch_group_size_per_vp_stage); 0 = stages.
  int64_t microbatch_group = 0;
  [[nodiscard]] int64_t group() const { return microbatch_group > 0 ? microbatch_group : stages; }
};

using ScheduleFn = std::vector<PipelineTask> (*)(const ScheduleParams&);
// Why a layout does not suit a schedule: the offending key, its value, the problem and what is
// allowed (for a ConfigError). An empty key: the layout suits it.
struct ScheduleProblem {
  std::string key, value, problem, allowed;
};
using ScheduleRule = ScheduleProblem (*)(const ScheduleParams&);

// GPipe (Huang et al. 2019): all forwards, then all backwards (last micro-batch first).
std::vector<PipelineTask> schedule_gpipe(const ScheduleParams& p);
// 1F1B / PipeDream-Flush (Narayanan et al. 2021, Sec. 2.2.1; Fig. 4 top).
std::vector<PipelineTask> schedule_1f1b(const ScheduleParams& p);
// Megatron-LM's rules on an interleaving micro-batch group g for m micro-batches on p stages
// (schedules.py): p <= g <= m and m mod g either 0 or >= p. The smallest such g; 0 when none.
int64_t smallest_microbatch_group(int64_t microbatches, int64_t stages);
// Interleaved 1F1B (Narayanan et al. 2021, Sec. 2.2.2; Fig. 4 bottom), Megatron-LM's schedule
// table with micro-batch groups of ScheduleParams::group().
std::vector<PipelineTask> schedule_interleaved(const ScheduleParams& p);
// 1F1B's order (warm-up of p - s - 1 forwards, steady F then backward, drain), with
// `backward(out, mb)` appending what the backward of micro-batch mb runs; 1F1B and ZB-H1 share it.
std::vector<PipelineTask> one_f_one_b_order(const ScheduleParams& p,
                                            const std::function<void(std::vector<PipelineTask>&, int32_t)>& backward);
// ZB-H1 (Qi et al. 2024, Sec. 3.1): 1F1B with W deferred, 1F1B's peak memory.
std::vector<PipelineTask> schedule_zb_h1(const ScheduleParams& p);
// ZB-H2 (Qi et al. 2024, Sec. 3.1): more warm-up forwards and W moved to the tail.
std::vector<PipelineTask> schedule_zb_h2(const ScheduleParams& p);

struct ScheduleInfo {
  Schedule schedule;
  ScheduleFn fn;
  ScheduleRule rule;
  bool splits_backward;  // emits B and W tasks (the IR splits each backward)
};

// The registry: Schedule -> its generator, rule and properties.
const ScheduleInfo& schedule_info(Schedule s);
ScheduleFn schedule_for(Schedule s);
// Most (micro-batch, chunk) pairs whose activations a stage holds at once under a schedule:
// counted on the task list (a forward holds until its W or whole backward).
int64_t peak_in_flight(const std::vector<PipelineTask>& tasks);

}  // namespace paralab
