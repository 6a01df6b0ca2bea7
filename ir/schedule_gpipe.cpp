// paralab — GPipe schedule (Huang et al. 2019): every forward, then every backward.
// Backwards run in reverse micro-batch order so the last stage starts its backward with the
// micro-batch whose forward it just finished.
#include "ir/schedule.hpp"

namespace paralab {

std::vector<PipelineTask> schedule_gpipe(const ScheduleParams& p) {
  std::vector<PipelineTask> out;
  out.reserve(static_cast<size_t>(2 * p.microbatches));
  for (int64_t i = 0; i < p.microbatches; ++i) out.push_back({TaskKind::forward, static_cast<int32_t>(i), 0});
  for (int64_t i = p.microbatches - 1; i >= 0; --i) out.push_back({TaskKind::backward, static_cast<int32_t>(i), 0});
  return out;
}

}  // namespace paralab
