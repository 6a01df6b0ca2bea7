// paralab simulate — what per-rank variation costs: a straggler's price against the same
// cluster without it, and step-time distributions over cluster draws (--samples N).
#pragma once

#include <optional>
#include <vector>

#include "apps/cli.hpp"
#include "ir/step_ir.hpp"
#include "sim/samples.hpp"
#include "sim/simulate.hpp"
#include <nlohmann/json.hpp>

namespace paralab::cli {

// `--slow-rank R --slowdown F` as a straggler of `s` (F >= 1; R a rank of its layout).
void add_slow_rank(const Args& a, Scenario& s);

// A straggler's cost at a larger cluster: k times the data-parallel replicas (weak scaling: the
// nodes and the global batch grow with them), the step with and without the stragglers.
struct StragglerGrowth {
  int64_t factor = 1, gpus = 0;
  double with_s = 0, without_s = 0;
};

struct VariationReport {
  std::optional<double> without_stragglers_s;  // the step with every straggler removed
  std::vector<StragglerGrowth> growth;          // --growth: at 2x and 4x the replicas
  std::optional<sim::Distribution> samples;    // --samples N
};

// Runs what the scenario's variation and --samples ask for (nothing without either).
VariationReport variation_report(const Args& a, const StepIR& ir);

void print_variation(const VariationReport& v, const StepIR& ir, double step_s);
void add_variation_json(nlohmann::json& j, const VariationReport& v, double step_s);

}  // namespace paralab::cli
