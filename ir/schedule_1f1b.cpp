// paralab — 1F1B (PipeDream-Flush) schedule, Narayanan et al. 2021 Sec. 2.2.1.
// Stage s runs min(p - s - 1, m) warm-up forwards, then alternates one forward and one
// backward, then drains the remaining backwards. At most p - s micro-batches are in flight on
// stage s, so activation memory is bounded by p micro-batches on the first stage.
#include <algorithm>

#include "ir/schedule.hpp"

namespace paralab {

std::vector<PipelineTask> one_f_one_b_order(const ScheduleParams& p,
                                            const std::function<void(std::vector<PipelineTask>&, int32_t)>& backward) {
  const int64_t m = p.microbatches;
  const int64_t warmup = std::min(p.stages - p.stage - 1, m);
  std::vector<PipelineTask> out;
  out.reserve(static_cast<size_t>(3 * m));
  int32_t next_fwd = 0, next_bwd = 0;
  for (int64_t i = 0; i < warmup; ++i) out.push_back({TaskKind::forward, next_fwd++, 0});
  for (int64_t i = 0; i < m - warmup; ++i) {
    out.push_back({TaskKind::forward, next_fwd++, 0});
    backward(out, next_bwd++);
  }
  while (next_bwd < m) backward(out, next_bwd++);
  return out;
}

std::vector<PipelineTask> schedule_1f1b(const ScheduleParams& p) {
  return one_f_one_b_order(p, [](std::vector<PipelineTask>& out, int32_t mb) {
    out.push_back({TaskKind::backward, mb, 0});
  });
}

}  // namespace paralab
