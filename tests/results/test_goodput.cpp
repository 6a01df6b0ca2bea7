// paralab tests — goodput (results/goodput.hpp): Daly's optimum against a numeric minimum of his
// own wall-time model, Young's first order, the limits, checkpoint bytes, and bad input.
#include <catch2/catch.hpp>

#include <cmath>

#include "ir/error.hpp"
#include "results/goodput.hpp"
#include "../ir/test_util.hpp"

using namespace paralab;

namespace {

// The tau minimizing Daly's T_w, by golden-section search on [lo, hi].
double numeric_optimum(double delta, double restart, double mtbf, double lo, double hi) {
  const double phi = (std::sqrt(5.0) - 1) / 2;
  auto f = [&](double t) { return daly_wall_s(1e6, t, delta, restart, mtbf); };
  double a = lo, b = hi;
  for (int i = 0; i < 200; ++i) {
    const double c = b - phi * (b - a), d = a + phi * (b - a);
    (f(c) < f(d) ? b : a) = f(c) < f(d) ? d : c;
  }
  return (a + b) / 2;
}

Scenario llama_scenario(const std::vector<std::string>& sets = {}) {
  return test::scenario_from(
      "[model]\npreset = \"llama3-405b\"\n[training]\nglobal_batch_size = 2048\n[parallel]\ntensor = 8\npipeline = 16\ndecoder_first_pipeline_num_layers = 7\ndecoder_last_pipeline_num_layers = 7\n"
      "[cluster]\ntopology = \"dgx-h100\"\nnodes = 2048\n",
      sets);
}

}  // namespace

TEST_CASE("Daly's optimum interval is the minimum of his wall-time model; Young's is its first order", "[goodput]") {
  const double mtbf = 3 * 3600.0, restart = 600;
  for (double delta : {1.0, 10.0, 60.0, 300.0, 1800.0}) {
    INFO("delta " << delta);
    const double daly = daly_interval_s(delta, mtbf), young = young_interval_s(delta, mtbf);
    const double best = numeric_optimum(delta, restart, mtbf, 1.0, 10 * mtbf);
    // The closed form is an expansion in delta / M: its interval within 2 % of the true
    // minimum, and its wall time within 0.01 % of the least.
    CHECK(daly == Approx(best).epsilon(0.02));
    CHECK(daly_wall_s(1e6, daly, delta, restart, mtbf) == Approx(daly_wall_s(1e6, best, delta, restart, mtbf)).epsilon(1e-4));
    CHECK(young == Approx(std::sqrt(2 * delta * mtbf)));
    if (delta <= 60) CHECK(young == Approx(daly).epsilon(0.08));  // first order for delta << M
  }
  CHECK(daly_interval_s(3 * mtbf, mtbf) == mtbf);  // delta >= 2M: checkpoint every M
}

TEST_CASE("goodput: limits, the checkpoint's bytes and its costs", "[goodput]") {
  const Scenario s = llama_scenario();
  const int64_t params = 405'850'000'000;
  CHECK(checkpoint_bytes(s, params) == Approx(params * 14.0));  // bf16 weights, fp32 master, Adam m and v
  const double step_s = 10.0, tokens = 1e12;
  const Goodput g = goodput(s, step_s, params, tokens);
  CHECK(g.solve_s == Approx(tokens / (2048.0 * s.model.seq_length) * step_s));
  CHECK(g.mtbf_s == Approx(86400.0 / (6.5e-3 * 2048)));  // the default rate, per node-day
  CHECK(g.checkpoint_write_s == Approx(params * 14.0 / 2000e9));
  CHECK(g.restart_s == Approx(600 + params * 14.0 / 2000e9));
  CHECK(g.interval_optimal);
  CHECK(g.interval_s == Approx(daly_interval_s(g.checkpoint_write_s, g.mtbf_s)));
  CHECK(g.goodput > 0.5);
  CHECK(g.goodput < 1.0);
  CHECK(g.failures == Approx(g.wall_s / g.mtbf_s));
  // Rarer failures, better goodput; a fixed interval costs more than the optimum.
  const Goodput rare = goodput(llama_scenario({"reliability.node_failures_per_day=1e-6"}), step_s, params, tokens);
  CHECK(rare.goodput > 0.999);
  const Goodput fixed = goodput(llama_scenario({"reliability.checkpoint_interval_s=36000"}), step_s, params, tokens);
  CHECK_FALSE(fixed.interval_optimal);
  CHECK(fixed.wall_s > g.wall_s);
  CHECK_THROWS_AS(goodput(llama_scenario({"reliability.node_failures_per_day=0"}), step_s, params, tokens), ConfigError);
}
