// paralab simulate — a straggler's price and step-time distributions (simulate_variation.hpp).
#include "apps/simulate_variation.hpp"

#include <cmath>
#include <cstdio>
#include <string>

#include "ir/scenario_loader.hpp"

namespace paralab::cli {

namespace {

std::string ms(double s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  return buf;
}

// The step of `ir` with its variation and with `without` (the same, no stragglers), per-op
// records off.
std::pair<double, double> with_and_without(const StepIR& ir, const VariationConfig& without) {
  sim::SimulateOptions o;
  o.record_ops = false;
  const double with_s = sim::simulate(ir, o).end_us * 1e-6;
  o.variation = &without;
  return {with_s, sim::simulate(ir, o).end_us * 1e-6};
}

StragglerGrowth grown(const Scenario& base, int64_t k, const VariationConfig& without) {
  Scenario s = base;
  s.parallel.data *= k;
  s.cluster.nodes *= k;
  s.training.global_batch_size *= k;
  validate_scenario(s);
  const StepIR ir = build_step_ir(s);
  const auto [with_s, without_s] = with_and_without(ir, without);
  return StragglerGrowth{k, ir.layout.world(), with_s, without_s};
}

}  // namespace

void add_slow_rank(const Args& a, Scenario& s) {
  const auto rank = a.value("--slow-rank");
  const auto factor = a.value("--slowdown");
  if (!rank && !factor) return;
  if (!rank || !factor) throw UsageError("--slow-rank R and --slowdown F go together");
  const double r = parse_number("--slow-rank", *rank, 0, static_cast<double>(s.world_size() - 1));
  if (r != std::floor(r)) throw UsageError("--slow-rank needs a whole rank number, got '" + *rank + "'");
  Straggler st;
  st.rank = static_cast<int64_t>(r);
  st.slowdown = parse_number("--slowdown", *factor, 1, 1000);
  s.variation.stragglers.push_back(st);
}

VariationReport variation_report(const Args& a, const StepIR& ir) {
  VariationReport v;
  const VariationConfig& var = ir.scenario.variation;
  if (!var.stragglers.empty()) {
    VariationConfig without = var;
    without.stragglers.clear();
    sim::SimulateOptions o;
    o.record_ops = false;
    o.variation = &without;
    v.without_stragglers_s = sim::simulate(ir, o).end_us * 1e-6;
    if (a.flag("--growth"))
      for (int64_t k : {2, 4}) v.growth.push_back(grown(ir.scenario, k, without));
  } else if (a.flag("--growth")) {
    throw UsageError("--growth prices stragglers at larger clusters: give one ([[variation.straggler]] or --slow-rank)");
  }
  if (auto n = a.value("--samples")) {
    const double x = parse_number("--samples", *n, 1, 1e6);
    if (x != std::floor(x)) throw UsageError("--samples needs a whole number, got '" + *n + "'");
    int threads = 0;
    if (auto t = a.value("--threads")) threads = static_cast<int>(parse_number("--threads", *t, 1, 1024));
    v.samples = sim::simulate_samples(ir, static_cast<int64_t>(x), threads);
  }
  return v;
}

void print_variation(const VariationReport& v, const StepIR& ir, double step_s) {
  const VariationConfig& var = ir.scenario.variation;
  if (v.without_stragglers_s) {
    const double base = *v.without_stragglers_s;
    std::string who;
    for (const Straggler& s : var.stragglers) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "%s%s %lld at %.3gx", who.empty() ? "" : ", ", s.rank ? "rank" : "node",
                    (long long)(s.rank ? *s.rank : *s.node), s.slowdown);
      who += buf;
    }
    std::printf("straggler   %s: step %s against %s without (+%.1f %%); removing %s saves %.1f %% of the step\n",
                who.c_str(), ms(step_s).c_str(), ms(base).c_str(), base > 0 ? 100 * (step_s / base - 1) : 0,
                var.stragglers.size() > 1 ? "them" : "it", step_s > 0 ? 100 * (1 - base / step_s) : 0);
    for (const StragglerGrowth& g : v.growth)
      std::printf("            at %lldx the replicas (%lld GPUs, weak scaling): +%.1f %% (%s against %s)\n", (long long)g.factor,
                  (long long)g.gpus, g.without_s > 0 ? 100 * (g.with_s / g.without_s - 1) : 0, ms(g.with_s).c_str(),
                  ms(g.without_s).c_str());
  }
  if (v.samples) {
    const sim::Distribution& d = *v.samples;
    std::printf("samples     %zu draws (variation.seed %lld + i): step p50 %s, p90 %s, p99 %s (min %s, max %s), mean MFU %.1f %%\n",
                d.runs.size(), (long long)var.seed, ms(d.p50_s).c_str(), ms(d.p90_s).c_str(), ms(d.p99_s).c_str(),
                ms(d.min_s).c_str(), ms(d.max_s).c_str(), 100 * d.mean_mfu);
    std::printf("critical    ");
    for (size_t i = 0; i < d.critical.size() && i < 5; ++i)
      std::printf("rank %lld in %.0f %%%s", (long long)d.critical[i].rank,
                  100.0 * static_cast<double>(d.critical[i].samples) / static_cast<double>(d.runs.size()),
                  i + 1 < std::min<size_t>(5, d.critical.size()) ? ", " : "");
    std::printf(" of the draws (the rank with the most compute on the critical path)\n");
    std::printf("            communication on it (mean):");
    for (size_t g = 0; g < d.mean_critical_comm_s.size(); ++g)
      if (d.mean_critical_comm_s[g] > 0)
        std::printf(" %s %s", std::string(to_string(static_cast<GroupKind>(g))).c_str(), ms(d.mean_critical_comm_s[g]).c_str());
    std::printf("\n");
  }
}

void add_variation_json(nlohmann::json& j, const VariationReport& v, double step_s) {
  if (v.without_stragglers_s) {
    j["without_stragglers_step_time_s"] = *v.without_stragglers_s;
    j["straggler_cost_s"] = step_s - *v.without_stragglers_s;
    nlohmann::json g = nlohmann::json::array();
    for (const StragglerGrowth& x : v.growth)
      g.push_back({{"replicas_factor", x.factor}, {"gpus", x.gpus}, {"step_time_s", x.with_s}, {"without_stragglers_step_time_s", x.without_s}});
    if (!v.growth.empty()) j["straggler_growth"] = g;
  }
  if (v.samples) {
    const sim::Distribution& d = *v.samples;
    j["samples"] = static_cast<int64_t>(d.runs.size());
    j["step_time_p50_s"] = d.p50_s;
    j["step_time_p90_s"] = d.p90_s;
    j["step_time_p99_s"] = d.p99_s;
    j["step_time_mean_s"] = d.mean_s;
    j["mean_mfu"] = d.mean_mfu;
    nlohmann::json slow = nlohmann::json::array();
    for (const sim::RankCount& c : d.critical) slow.push_back({{"rank", c.rank}, {"samples", c.samples}});
    j["critical_ranks"] = slow;
    nlohmann::json comm = nlohmann::json::object();
    for (size_t g = 0; g < d.mean_critical_comm_s.size(); ++g)
      comm[std::string(to_string(static_cast<GroupKind>(g)))] = d.mean_critical_comm_s[g];
    j["critical_path_comm_s"] = comm;
  }
}

}  // namespace paralab::cli
