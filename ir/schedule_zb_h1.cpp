// paralab — ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, Sec. 3.1).
// 1F1B's warm-up (p - s - 1 forwards) and steady F, B alternation, with each backward split
// into B and W. Stage s defers its first s W passes, so later stages send their input
// gradients on without waiting for weight gradients; the W passes fill the cool-down bubble.
// At most p micro-batches are in flight on any stage (1F1B's peak, held by stage 0), and for
// per-stage times F, B, W the bubble is (p - 1)(F + B - W) against 1F1B's (p - 1)(F + B + W).
#include <algorithm>

#include "ir/schedule.hpp"

namespace paralab {

std::vector<PipelineTask> schedule_zb_h1(const ScheduleParams& p) {
  const int64_t m = p.microbatches;
  const int64_t warmup = std::min(p.stages - p.stage - 1, m);
  std::vector<PipelineTask> out;
  out.reserve(static_cast<size_t>(3 * m));
  int32_t f = 0, b = 0, w = 0;
  auto backward = [&] {
    out.push_back({TaskKind::input_grad, b++, 0});
    if (b > p.stage) out.push_back({TaskKind::weight_grad, w++, 0});  // the first s W wait
  };
  for (int64_t i = 0; i < warmup; ++i) out.push_back({TaskKind::forward, f++, 0});
  while (f < m) {
    out.push_back({TaskKind::forward, f++, 0});
    backward();
  }
  while (b < m) backward();
  while (w < m) out.push_back({TaskKind::weight_grad, w++, 0});
  return out;
}

}  // namespace paralab
