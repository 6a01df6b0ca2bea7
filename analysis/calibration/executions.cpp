// paralab — the calibration's executions of a scenario (executions.hpp).
#include "analysis/calibration/executions.hpp"

#include <algorithm>

#include "exec/execute.hpp"

namespace paralab::calib {

std::vector<StepResult> execute_steps(const StepIR& ir, exec::Transport& world, const std::string& backend) {
  exec::ExecuteOptions eo;
  eo.backend = backend;
  eo.steps = ExecutionPlan::kMaxSteps;
  eo.measure_s = ExecutionPlan::kMeasureS;
  eo.warmup_s = ExecutionPlan::kWarmupS;
  eo.keep_steps = true;
  std::vector<StepResult> steps;
  exec::ExecuteOutcome out = exec::execute(ir, world, eo);
  int64_t more = 0;
  if (world.rank() == 0) {
    steps = std::move(out.steps);
    more = std::max<int64_t>(0, ExecutionPlan::kMinSteps - static_cast<int64_t>(steps.size()));
  }
  world.all_reduce(&more, 1, ReduceOp::max);  // rank 0 decides for everyone
  if (more > 0) {  // long steps: the rest of kMinSteps, exactly, after one warm-up step
    eo.steps = more;
    eo.measure_s = 0;
    out = exec::execute(ir, world, eo);
    if (world.rank() == 0)
      for (StepResult& s : out.steps) steps.push_back(std::move(s));
  }
  return steps;
}

}  // namespace paralab::calib
