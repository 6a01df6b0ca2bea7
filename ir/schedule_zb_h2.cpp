// paralab — ZB-H2 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, Sec. 3.1).
// Stage s warms up with 2 (p - s) - 1 forwards (filling the bubble before its first B), then
// while forwards remain runs B and F, inserting the oldest W only when 2p - 1 micro-batches are
// in flight (forwarded, W not yet run), then B, W pairs and the remaining W passes at the tail.
// Every stage so holds at most 2p - 1 micro-batches (Qi et al.'s (2p - 1) M_B), and the later
// stages, which start with fewer, defer more W into their cooldown: the timeline becomes a
// parallelogram, each stage idling (p - 1)(F + B - 2W) within its own span for per-stage
// times F, B, W (zero when F + B = 2W; tests/sim/engine/test_zero_bubble_forms.cpp). Reaching
// that bubble in a whole step needs the optimizer step free of a global synchronization
// (docs/simulator.md, "Zero-bubble schedules").
#include <algorithm>

#include "ir/schedule.hpp"

namespace paralab {

std::vector<PipelineTask> schedule_zb_h2(const ScheduleParams& p) {
  const int64_t m = p.microbatches;
  const int64_t warmup = std::min(2 * (p.stages - p.stage) - 1, m);
  std::vector<PipelineTask> out;
  out.reserve(static_cast<size_t>(3 * m));
  int32_t f = 0, b = 0, w = 0;
  for (int64_t i = 0; i < warmup; ++i) out.push_back({TaskKind::forward, f++, 0});
  while (f < m) {
    out.push_back({TaskKind::input_grad, b++, 0});
    if (f - w >= 2 * p.stages - 1) out.push_back({TaskKind::weight_grad, w++, 0});
    out.push_back({TaskKind::forward, f++, 0});
  }
  while (b < m) {
    out.push_back({TaskKind::input_grad, b++, 0});
    if (b < m) out.push_back({TaskKind::weight_grad, w++, 0});
  }
  while (w < m) out.push_back({TaskKind::weight_grad, w++, 0});
  return out;
}

}  // namespace paralab
