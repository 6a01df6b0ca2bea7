// paralab — how busy nn.DataParallel's devices are (docs/dataparallel.md). The simulator runs
// device 0's graph; a replica runs the same forward and backward without device 0's own work:
// the loss over the whole batch (the cross-entropy stages) and the optimizer. Busy = time the
// compute stream runs an op, as a fraction of the step.
#pragma once

#include "ir/step_ir.hpp"
#include "results/step_result.hpp"

namespace paralab {

struct DeviceBusy {
  double root_s = 0;     // device 0
  double replica_s = 0;  // every other device
  double step_s = 0;
};

// From a finished simulation of a data_parallel_impl = "dataparallel" scenario (rank 0's ops).
DeviceBusy dataparallel_busy(const StepResult& r, const StepIR& ir);

}  // namespace paralab
