// paralab — interleaved 1F1B schedule (Narayanan et al. 2021, Sec. 2.2.2), following
// Megatron-LM's forward_backward_pipelining_with_interleaving: the k-th forward of a stage
// runs chunk (k / p) mod v on micro-batch (k / (p v)) p + k mod p; backwards visit chunks in
// reverse. Warm-up is (p - s - 1) * 2 + (v - 1) * p forwards (capped at m v). This divides the
// bubble by v at the cost of v times more pipeline transfers. Needs m to be a multiple of p.
#include <algorithm>

#include "ir/schedule.hpp"

namespace paralab {

namespace {
PipelineTask task_of(int64_t k, bool forward, const ScheduleParams& p) {
  const int64_t group = p.stages * p.chunks;
  int64_t chunk = (k % group) / p.stages;
  if (!forward) chunk = p.chunks - 1 - chunk;
  const int64_t mb = (k / group) * p.stages + k % p.stages;
  return {forward ? TaskKind::forward : TaskKind::backward, static_cast<int32_t>(mb), static_cast<int16_t>(chunk)};
}
}  // namespace

std::vector<PipelineTask> schedule_interleaved(const ScheduleParams& p) {
  const int64_t total = p.microbatches * p.chunks;
  int64_t warmup = (p.stages - p.stage - 1) * 2 + (p.chunks - 1) * p.stages;
  warmup = std::min(warmup, total);
  std::vector<PipelineTask> out;
  out.reserve(static_cast<size_t>(2 * total));
  int64_t f = 0, b = 0;
  for (; f < warmup; ++f) out.push_back(task_of(f, true, p));
  while (f < total) {
    out.push_back(task_of(f++, true, p));
    out.push_back(task_of(b++, false, p));
  }
  while (b < total) out.push_back(task_of(b++, false, p));
  return out;
}

}  // namespace paralab
