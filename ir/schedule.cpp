// paralab — the schedule registry: adding a schedule is a new file and one row here.
#include "ir/schedule.hpp"

#include <algorithm>

#include "ir/error.hpp"

namespace paralab {

namespace {
ScheduleProblem one_chunk(const ScheduleParams& p) {
  if (p.chunks == 1) return {};
  return {"parallel.virtual_pipeline_stages", std::to_string(p.chunks),
          "this schedule runs one model chunk per stage", "1, or parallel.schedule = \"interleaved\""};
}

// Megatron-LM's interleaving (megatron/core/pipeline_parallel/schedules.py): several chunks,
// several stages and whole rounds of p micro-batches. Megatron's
// microbatch_group_size_per_vp_stage lifts the last rule by batching each step's sends and
// receives; with this IR's in-order pipeline streams that order can deadlock (docs/simulator.md).
ScheduleProblem interleaved_rule(const ScheduleParams& p) {
  if (p.stages < 2)
    return {"parallel.schedule", "\"interleaved\"", "the interleaved schedule needs pipeline >= 2",
            "gpipe | 1f1b | zb-h1 | zb-h2"};
  if (p.chunks < 2)
    return {"parallel.schedule", "\"interleaved\"", "the interleaved schedule needs virtual_pipeline_stages >= 2",
            "gpipe | 1f1b | zb-h1 | zb-h2, or parallel.virtual_pipeline_stages >= 2"};
  if (p.microbatches % p.stages != 0)
    return {"training.global_batch_size", std::to_string(p.microbatches) + " micro-batches per data-parallel rank",
            "the interleaved schedule needs a multiple of pipeline (" + std::to_string(p.stages) + ") micro-batches",
            "a global batch of a multiple of pipeline x micro_batch_size x data"};
  return {};
}

constexpr ScheduleInfo kSchedules[] = {
    {Schedule::gpipe, &schedule_gpipe, &one_chunk, false},
    {Schedule::one_f_one_b, &schedule_1f1b, &one_chunk, false},
    {Schedule::interleaved, &schedule_interleaved, &interleaved_rule, false},
    {Schedule::zb_h1, &schedule_zb_h1, &one_chunk, true},
    {Schedule::zb_h2, &schedule_zb_h2, &one_chunk, true},
};
}  // namespace

const ScheduleInfo& schedule_info(Schedule s) {
  for (const auto& e : kSchedules)
    if (e.schedule == s) return e;
  throw InternalError("no pipeline schedule registered for this Schedule value");
}

ScheduleFn schedule_for(Schedule s) { return schedule_info(s).fn; }

int64_t peak_in_flight(const std::vector<PipelineTask>& tasks) {
  int64_t live = 0, peak = 0;
  for (const PipelineTask& t : tasks) {
    if (t.kind == TaskKind::forward) peak = std::max(peak, ++live);
    else if (t.kind != TaskKind::input_grad) --live;
  }
  return peak;
}

}  // namespace paralab
