// paralab — how large the IR of a scenario will be, known before it is generated, so that a
// scenario the machine cannot hold is refused with a message instead of being killed by the
// kernel's OOM killer halfway through generation.
#pragma once

#include "ir/scenario.hpp"

namespace paralab {

struct IrSizeEstimate {
  double ops = 0;    // ops over all stage graphs (an upper bound, within ~1.5x)
  double bytes = 0;  // host memory to generate and simulate them
};

// From the layer count, micro-batches, pipeline stages and context-parallel ring steps alone.
IrSizeEstimate estimate_ir_size(const Scenario& s);

// The host's available memory (Linux MemAvailable), in bytes; 0 when unknown.
double host_memory_available_bytes();

// Throws ConfigError (at training.global_batch_size, with the estimate and what would fit) when
// the estimate exceeds 90% of `available_bytes`; does nothing when `available_bytes` <= 0.
void check_ir_fits_host(const Scenario& s, double available_bytes);

}  // namespace paralab
