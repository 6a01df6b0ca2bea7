// paralab — the schedule registry: adding a schedule is a new file and one row here.
#include "ir/schedule.hpp"

#include <algorithm>

#include "ir/error.hpp"

namespace paralab {

namespace {
bool valid_group(int64_t m, int64_t p, int64_t g) { return g >= p && g <= m && (m % g == 0 || m % g >= p); }

ScheduleProblem one_chunk(const ScheduleParams& p) {
  if (p.chunks == 1) return {};
  return {"parallel.virtual_pipeline_stages", std::to_string(p.chunks),
          "this schedule runs one model chunk per stage", "1, or parallel.schedule = \"interleaved\""};
}

// Megatron-LM's interleaving (megatron/core/pipeline_parallel/schedules.py): several chunks,
// several stages, and its rules on the micro-batch groups.
ScheduleProblem interleaved_rule(const ScheduleParams& p) {
  if (p.stages < 2)
    return {"parallel.schedule", "\"interleaved\"", "the interleaved schedule needs pipeline >= 2",
            "gpipe | 1f1b | zb-h1 | zb-h2"};
  if (p.chunks < 2)
    return {"parallel.schedule", "\"interleaved\"", "the interleaved schedule needs virtual_pipeline_stages >= 2",
            "gpipe | 1f1b | zb-h1 | zb-h2, or parallel.virtual_pipeline_stages >= 2"};
  // Megatron-LM's two rules on g = microbatch_group_size_per_vp_stage (schedules.py): p <= g <= m,
  // and the last group, m mod g, empty or at least p ("dependency bubbles" otherwise).
  const int64_t g = p.group(), m = p.microbatches;
  const std::string gs = std::to_string(g), ms = std::to_string(m), ps = std::to_string(p.stages);
  if (g < p.stages || g > m)
    return {p.microbatch_group > 0 ? "parallel.microbatch_group_size_per_vp_stage" : "training.global_batch_size",
            p.microbatch_group > 0 ? gs : ms + " micro-batches per data-parallel rank",
            "Megatron-LM: the number of contiguous micro-batches in a virtual pipeline stage (" + gs +
                ") should range in [PP=" + ps + ", M=" + ms + "]",
            "a group of " + ps + " .. " + ms + " micro-batches, and at least pipeline micro-batches per data-parallel rank"};
  if (!valid_group(m, p.stages, g))
    return {"parallel.microbatch_group_size_per_vp_stage", gs,
            "Megatron-LM: the remainder of M (" + ms + " micro-batches) divided by N (" + gs +
                ") should be 0 or at least the pipeline size (" + ps + "); otherwise it introduces dependency bubbles",
            "a group size N in [" + ps + ", " + ms + "] with M mod N = 0 or >= " + ps +
                (m % p.stages == 0 ? "" : " (e.g. N = M = " + ms + ")")};
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

int64_t smallest_microbatch_group(int64_t microbatches, int64_t stages) {
  for (int64_t g = stages; g <= microbatches; ++g)
    if (valid_group(microbatches, stages, g)) return g;
  return 0;
}

int64_t peak_in_flight(const std::vector<PipelineTask>& tasks) {
  int64_t live = 0, peak = 0;
  for (const PipelineTask& t : tasks) {
    if (t.kind == TaskKind::forward) peak = std::max(peak, ++live);
    else if (t.kind != TaskKind::input_grad) --live;
  }
  return peak;
}

}  // namespace paralab
