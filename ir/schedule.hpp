// paralab — pipeline schedules: the order in which one stage runs the forward and backward
// passes of its micro-batches and model chunks. One file per schedule, registered by enum.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/scenario.hpp"

namespace paralab {

struct PipelineTask {
  bool forward = true;
  int32_t microbatch = 0;
  int16_t chunk = 0;  // virtual pipeline chunk on this stage (0 unless interleaved)
  bool operator==(const PipelineTask&) const = default;
};

struct ScheduleParams {
  int64_t stages = 1;       // p
  int64_t stage = 0;        // this stage
  int64_t microbatches = 1; // m
  int64_t chunks = 1;       // v (virtual stages per stage)
};

using ScheduleFn = std::vector<PipelineTask> (*)(const ScheduleParams&);

// GPipe (Huang et al. 2019): all forwards, then all backwards (last micro-batch first).
std::vector<PipelineTask> schedule_gpipe(const ScheduleParams& p);
// 1F1B / PipeDream-Flush (Narayanan et al. 2021, Sec. 2.2.1; Fig. 4 top).
std::vector<PipelineTask> schedule_1f1b(const ScheduleParams& p);
// Interleaved 1F1B (Narayanan et al. 2021, Sec. 2.2.2; Fig. 4 bottom), Megatron-LM's order.
std::vector<PipelineTask> schedule_interleaved(const ScheduleParams& p);

// The registry: Schedule -> function.
ScheduleFn schedule_for(Schedule s);

}  // namespace paralab
