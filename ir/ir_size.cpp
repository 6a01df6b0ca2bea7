// paralab — the IR size estimate and the host-memory check (ir/ir_size.hpp).
#include "ir/ir_size.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "ir/error.hpp"

namespace paralab {

namespace {

// Per layer and micro-batch, forward + backward + recomputation, with TP/SP collectives and
// memory events: 47 measured on GPT-3 175B (TP8 PP16, 577,130 ops for 96 layers x 128
// micro-batches, bench/results/sim_speed.md); 64 bounds every recomputation mode. Each extra
// ring-attention step of context parallelism adds a KV exchange and a block of attention,
// forward and backward. Per stage and micro-batch: embedding, head, loss and pipeline
// transfers.
constexpr double kOpsPerLayerMicrobatch = 64;
constexpr double kOpsPerRingStep = 16;
constexpr double kOpsPerStageMicrobatch = 32;
// Host bytes per op, generation and simulation together: 0.50 GiB peak RSS for 577,130 ops
// (~930 B) in the same measurement, rounded up.
constexpr double kBytesPerOp = 1024;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string gib(double bytes) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3g GiB", bytes / kGiB);
  return buf;
}

}  // namespace

IrSizeEstimate estimate_ir_size(const Scenario& s) {
  const double m = static_cast<double>(std::max<int64_t>(1, s.num_microbatches()));
  const double layers = static_cast<double>(s.model.num_layers);
  const double ring = static_cast<double>(std::max<int64_t>(1, s.parallel.context) - 1);
  const double chunks = static_cast<double>(s.parallel.pipeline * std::max<int64_t>(1, s.parallel.virtual_pipeline_stages));
  IrSizeEstimate e;
  e.ops = layers * m * (kOpsPerLayerMicrobatch + kOpsPerRingStep * ring) + chunks * m * kOpsPerStageMicrobatch;
  e.bytes = e.ops * kBytesPerOp;
  return e;
}

double host_memory_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  double kb = 0;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024.0;
  return 0;
}

void check_ir_fits_host(const Scenario& s, double available_bytes) {
  if (available_bytes <= 0) return;
  const IrSizeEstimate e = estimate_ir_size(s);
  const double budget = 0.9 * available_bytes;
  if (e.bytes <= budget) return;
  const int64_t m = std::max<int64_t>(1, s.num_microbatches());
  const double per_step = static_cast<double>(s.training.global_batch_size) / static_cast<double>(m);
  const int64_t fit_m = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(m) * budget / e.bytes));
  char ops[32];
  std::snprintf(ops, sizeof ops, "%.3g", e.ops);
  throw ConfigError(s.provenance.at("training.global_batch_size"), "training.global_batch_size",
                    std::to_string(s.training.global_batch_size),
                    "gives " + std::to_string(m) + " micro-batches x " + std::to_string(s.model.num_layers) +
                        " layers, about " + ops + " ops and " + gib(e.bytes) +
                        " to generate and simulate, more than this machine has available (" + gib(available_bytes) + ")",
                    "at most about " + std::to_string(static_cast<int64_t>(static_cast<double>(fit_m) * per_step)) +
                        " (" + std::to_string(fit_m) + " micro-batches), or a larger micro_batch_size");
}

}  // namespace paralab
