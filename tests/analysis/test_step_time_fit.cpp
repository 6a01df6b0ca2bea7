// paralab tests — calibration from step times (analysis/calibration/step_time_fit.hpp): "measured"
// step times made by simulating with known corrections are fitted back; one run fits one term
// and says the others need more runs; runs that cannot tell two terms apart say so; bad input
// is refused by name.
#include <catch2/catch.hpp>

#include "analysis/calibration/step_time_fit.hpp"
#include "../ir/test_util.hpp"

using namespace paralab;
using namespace paralab::calib;

namespace {

// A 1.3B-class GPT on two DGX A100 nodes: TP8 inside a node, DP2 across InfiniBand.
Scenario gpt(const std::vector<std::string>& sets) {
  const std::string toml =
      "[model]\nnum_layers = 4\nhidden_size = 2048\nnum_attention_heads = 16\nffn_hidden_size = 8192\nvocab_size = 32000\n"
      "seq_length = 2048\n[training]\nglobal_batch_size = 16\nmicro_batch_size = 1\nprecision = \"bf16\"\n"
      "[parallel]\ntensor = 8\npipeline = 1\ndata = 2\n[cluster]\ntopology = \"dgx-a100\"\nnodes = 2\n";
  return test::scenario_from(toml, sets);
}

// The step of `s` as if the machine ran compute `cf` and communication `mf` times the model
// (a communication factor >= 1: the network model is the floor of a call).
double measured(const Scenario& s, double cf, double mf) {
  std::vector<CorrectionRow> rows = {{OpClass{CostKind::time, OpFamily::compute}, {0, cf}, 0, 0},
                                     {OpClass{CostKind::time, OpFamily::comm}, {0, mf}, 0, 0}};
  return simulated_step_s(s, CorrectionTable(rows));
}

const StepTimeTerm& term(const StepTimeFit& f, const std::string& name) {
  for (const StepTimeTerm& t : f.terms)
    if (t.name == name) return t;
  FAIL("no term " << name);
  return f.terms[0];
}

}  // namespace

TEST_CASE("step-time fit: two runs that load compute and communication differently recover both factors", "[analysis][step-time]") {
  // Eight micro-batches against one: the data-parallel all-reduce is a larger part of the short step.
  const Scenario a = gpt({}), b = gpt({"training.global_batch_size=2"});
  const std::vector<StepTimeRun> runs = {{"gbs16", a, measured(a, 1.3, 1.5)}, {"gbs2", b, measured(b, 1.3, 1.5)}};
  const StepTimeFit f = fit_step_times(runs);
  CHECK(term(f, "compute").why_not.empty());
  CHECK(term(f, "compute").value == Approx(1.3).epsilon(0.01));
  CHECK(term(f, "communication").why_not.empty());
  CHECK(term(f, "communication").value == Approx(1.5).epsilon(0.02));
  CHECK(term(f, "dispatch").why_not.find("needs more runs") != std::string::npos);
  for (size_t i = 0; i < runs.size(); ++i) {
    CHECK(f.before_s[i] != Approx(runs[i].measured_s).epsilon(0.05));
    CHECK(f.after_s[i] == Approx(runs[i].measured_s).epsilon(0.001));
  }
  // The table holds the two fitted rows and nothing else.
  CHECK(f.table.rows().size() == 2);
}

TEST_CASE("step-time fit: one run fits the term with the largest effect and names what it cannot fit", "[analysis][step-time]") {
  const Scenario a = gpt({});
  const StepTimeFit f = fit_step_times({{"gbs16", a, 1.25 * simulated_step_s(a, {})}});
  CHECK(term(f, "compute").why_not.empty());
  CHECK(term(f, "compute").value > 1.0);
  CHECK(f.after_s[0] == Approx(1.25 * f.before_s[0]).epsilon(0.001));
  CHECK(term(f, "communication").why_not == "needs more runs (1 step time fit 1 term)");
}

TEST_CASE("step-time fit: the same run twice cannot tell compute from communication", "[analysis][step-time]") {
  const Scenario a = gpt({});
  const double m = 1.1 * simulated_step_s(a, {});
  const StepTimeFit f = fit_step_times({{"first", a, m}, {"again", a, m}});
  CHECK(term(f, "compute").why_not.empty());
  CHECK(term(f, "communication").why_not.find("indistinguishable from compute") != std::string::npos);
  CHECK(term(f, "dispatch").why_not.find("indistinguishable") != std::string::npos);
}

TEST_CASE("step-time fit: bad input is refused by name", "[analysis][step-time]") {
  const Scenario a = gpt({});
  CHECK_THROWS_WITH(fit_step_times({}), Catch::Contains("no runs"));
  CHECK_THROWS_WITH(fit_step_times({{"zero", a, 0.0}}), Catch::Contains("run 'zero'") && Catch::Contains("> 0"));
  const Scenario h = gpt({"cluster.topology=dgx-h100"});
  CHECK_THROWS_WITH(fit_step_times({{"a100", a, 1.0}, {"h100", h, 1.0}}),
                    Catch::Contains("'h100' is on topology 'dgx-h100'") && Catch::Contains("'dgx-a100'"));
}
