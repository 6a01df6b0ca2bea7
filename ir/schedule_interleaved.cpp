// paralab — interleaved 1F1B schedule (Narayanan et al. 2021, Sec. 2.2.2), following
// Megatron-LM's forward_backward_pipelining_with_interleaving (megatron/core/pipeline_parallel/
// schedules.py): forwards run in the order of its schedule table, which takes the micro-batches
// in groups of g = microbatch_group_size_per_vp_stage (the pipeline size by default; the last
// group holds the rest) and runs every chunk of a group before the next group; the k-th
// backward takes the k-th table entry with its chunk reversed. Warm-up is (p - s - 1) * 2 +
// (v - 1) * g forwards (capped at m v). This divides the bubble by v at the cost of v times more
// pipeline transfers.
#include <algorithm>

#include "ir/schedule.hpp"

namespace paralab {

namespace {
// Megatron's get_schedule_table: (micro-batch, chunk) of every forward, in order.
std::vector<PipelineTask> schedule_table(const ScheduleParams& p) {
  std::vector<PipelineTask> t;
  const int64_t g = p.group();
  for (int64_t lo = 0; lo < p.microbatches; lo += g) {
    const int64_t hi = lo + g >= p.microbatches ? p.microbatches : lo + g;
    for (int64_t c = 0; c < p.chunks; ++c)
      for (int64_t mb = lo; mb < hi; ++mb)
        t.push_back({TaskKind::forward, static_cast<int32_t>(mb), static_cast<int16_t>(c)});
  }
  return t;
}
}  // namespace

std::vector<PipelineTask> schedule_interleaved(const ScheduleParams& p) {
  const std::vector<PipelineTask> table = schedule_table(p);
  const int64_t total = static_cast<int64_t>(table.size());
  const int64_t warmup = std::min(total, (p.stages - p.stage - 1) * 2 + (p.chunks - 1) * p.group());
  auto backward = [&](int64_t k) {
    PipelineTask t = table[static_cast<size_t>(k)];
    t.kind = TaskKind::backward;
    t.chunk = static_cast<int16_t>(p.chunks - 1 - t.chunk);
    return t;
  };
  std::vector<PipelineTask> out;
  out.reserve(static_cast<size_t>(2 * total));
  int64_t f = 0, b = 0;
  for (; f < warmup; ++f) out.push_back(table[static_cast<size_t>(f)]);
  while (f < total) {
    out.push_back(table[static_cast<size_t>(f++)]);
    out.push_back(backward(b++));
  }
  while (b < total) out.push_back(backward(b++));
  return out;
}

}  // namespace paralab
