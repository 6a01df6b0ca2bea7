// paralab — a closed-form estimate of a layout's peak memory per device, for pruning the
// planner's candidates before anything is built or simulated. It mirrors the buffers the IR
// saves per layer (Korthikanti et al. 2022, Sec. 4; docs/ir.md), the micro-batches each
// schedule keeps in flight (Narayanan et al. 2021, Sec. 2.2) and ZeRO's model states
// (Rajbhandari et al. 2020), plus the largest transient working set; tests hold it to the IR's
// own memory replay. The simulator has the final word on whether a layout fits.
#pragma once

#include <cstdint>

#include "ir/scenario.hpp"

namespace paralab {

struct MemoryEstimate {
  double peak_bytes = 0;  // max over pipeline stages
  int64_t stage = 0;      // the stage at the peak
  double resident = 0, activations = 0, transient = 0;  // of that stage, bytes
};

MemoryEstimate estimate_memory(const Scenario& s);

}  // namespace paralab
