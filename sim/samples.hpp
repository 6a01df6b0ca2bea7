// paralab — step-time distributions over cluster draws: `simulate --samples N` simulates N
// draws of the scenario's [variation] (per-GPU speeds from variation.seed + i; stragglers and
// node groups in every draw) and reports percentiles, mean MFU and what the critical path ran
// through: which ranks' compute, and how much communication of each group kind.
//
//   const sim::Distribution d = sim::simulate_samples(ir, 100, /*threads=*/0);
//   d.p50_s, d.p90_s, d.p99_s, d.mean_mfu, d.critical ...
//
// Samples run on `threads` threads (0: every core); each is an independent simulate() and the
// runs are kept by sample index, so the output does not depend on the thread count.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "ir/step_ir.hpp"

namespace paralab::sim {

struct SampleRun {
  int64_t sample = 0;
  double step_time_s = 0;
  double mfu = 0;
  int64_t critical_rank = 0;    // the rank with the most compute time on the critical path
  std::array<double, static_cast<size_t>(GroupKind::kCount)> critical_comm_s{};  // on the path, per group kind
  int64_t simulated_ranks = 0;  // classes the engine ran
};

struct RankCount {
  int64_t rank = 0;
  int64_t samples = 0;  // in how many draws it was the critical rank
};

struct Distribution {
  std::vector<SampleRun> runs;  // by sample
  double p50_s = 0, p90_s = 0, p99_s = 0, mean_s = 0, min_s = 0, max_s = 0;
  double mean_mfu = 0;
  std::vector<RankCount> critical;  // most frequent first (ties: lower rank first)
  std::array<double, static_cast<size_t>(GroupKind::kCount)> mean_critical_comm_s{};
};

// Nearest-rank percentile q in (0, 1] of `values` (sorted or not).
double percentile(std::vector<double> values, double q);

Distribution simulate_samples(const StepIR& ir, int64_t samples, int threads = 0);

}  // namespace paralab::sim
