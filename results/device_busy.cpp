// paralab — busy time of nn.DataParallel's device 0 and of its replicas (device_busy.hpp).
#include "results/device_busy.hpp"

#include <algorithm>
#include <vector>

namespace paralab {

namespace {
// Device 0's own work: the loss over the gathered batch and the optimizer phase.
bool root_only(const Op& op) {
  switch (op.kind) {
    case OpKind::xent_max:
    case OpKind::xent_sum:
    case OpKind::xent_loss:
    case OpKind::xent_bwd: return true;
    default: return op.phase == Phase::optimizer;
  }
}

}  // namespace

DeviceBusy dataparallel_busy(const StepResult& r, const StepIR& ir) {
  const StepGraph& g = ir.graph_for(0);
  std::vector<std::pair<double, double>> all, replica;
  for (const OpTiming& t : r.ops) {
    if (t.rank != 0) continue;
    const Op& op = g.op(t.op);
    if (op.stream != Stream::compute) continue;
    all.emplace_back(t.start_us, t.end_us);
    if (!root_only(op)) replica.emplace_back(t.start_us, t.end_us);
  }
  return {union_length(all) * 1e-6, union_length(replica) * 1e-6, r.step_time_s};
}

}  // namespace paralab
