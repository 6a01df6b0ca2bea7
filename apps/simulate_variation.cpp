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
  }
  if (v.samples) {
    const sim::Distribution& d = *v.samples;
    std::printf("samples     %zu draws (variation.seed %lld + i): step p50 %s, p90 %s, p99 %s (min %s, max %s), mean MFU %.1f %%\n",
                d.runs.size(), (long long)var.seed, ms(d.p50_s).c_str(), ms(d.p90_s).c_str(), ms(d.p99_s).c_str(),
                ms(d.min_s).c_str(), ms(d.max_s).c_str(), 100 * d.mean_mfu);
    std::printf("slowest     ");
    for (size_t i = 0; i < d.slowest.size() && i < 5; ++i)
      std::printf("rank %lld in %.0f %%%s", (long long)d.slowest[i].rank,
                  100.0 * static_cast<double>(d.slowest[i].samples) / static_cast<double>(d.runs.size()),
                  i + 1 < std::min<size_t>(5, d.slowest.size()) ? ", " : "");
    std::printf(" of the draws (the rank with the most compute time)\n");
  }
}

void add_variation_json(nlohmann::json& j, const VariationReport& v, double step_s) {
  if (v.without_stragglers_s) {
    j["without_stragglers_step_time_s"] = *v.without_stragglers_s;
    j["straggler_cost_s"] = step_s - *v.without_stragglers_s;
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
    for (const sim::RankCount& c : d.slowest) slow.push_back({{"rank", c.rank}, {"samples", c.samples}});
    j["slowest_ranks"] = slow;
  }
}

}  // namespace paralab::cli
