// paralab — ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, Sec. 3.1).
// 1F1B's warm-up (p - s - 1 forwards) and steady F, B alternation, with each backward split
// into B and W. Stage s defers its first s W passes, so later stages send their input
// gradients on without waiting for weight gradients; the W passes fill the cool-down bubble.
// At most p micro-batches are in flight on any stage (1F1B's peak, held by stage 0), and for
// per-stage times F, B, W the bubble is (p - 1)(F + B - W) against 1F1B's (p - 1)(F + B + W).
#include "ir/schedule.hpp"

namespace paralab {

std::vector<PipelineTask> schedule_zb_h1(const ScheduleParams& p) {
  int32_t w = 0;
  std::vector<PipelineTask> out = one_f_one_b_order(p, [&](std::vector<PipelineTask>& o, int32_t mb) {
    o.push_back({TaskKind::input_grad, mb, 0});
    if (mb >= p.stage) o.push_back({TaskKind::weight_grad, w++, 0});  // the first s W wait
  });
  while (w < p.microbatches) out.push_back({TaskKind::weight_grad, w++, 0});
  return out;
}

}  // namespace paralab
