// paralab tests — the planner's lower bound (plan/lower_bound.hpp): never above a layout's
// screened or exact step over a sweep of layouts, its probes' parts, and pruning that keeps
// the ranking of every layout shown.
#include <catch2/catch.hpp>

#include <map>

#include "plan/lower_bound.hpp"
#include "plan/planner.hpp"
#include "../ir/test_util.hpp"

using namespace paralab;

namespace {

// A small model on 2 nodes of 8 GPUs: tensor, pipeline, data parallelism (across nodes), ZeRO
// 0-3 and recomputation all vary.
Scenario sweep_base() {
  const std::string toml =
      "[model]\npreset = \"tiny\"\n[training]\nglobal_batch_size = 32\n[cluster]\ntopology = \"dgx-a100\"\nnodes = 2\n";
  test::TempFile f(toml);
  return load_scenario(f.path(), {}, /*check_layout=*/false);
}

PlanOptions every_layout(bool exact) {
  PlanOptions o;
  o.threads = 2;
  o.prune = false;
  o.exact = exact;
  o.bounds.max_micro_batch = 2;
  return o;
}

}  // namespace

TEST_CASE("the lower bound is below every layout's screened and exact step", "[plan][bound]") {
  const Scenario base = sweep_base();
  LowerBound lb;
  for (bool exact : {false, true}) {
    INFO((exact ? "exact" : "screened"));
    const PlanResult r = plan(base, every_layout(exact));
    REQUIRE(r.layouts.size() > 20);
    int data_parallel = 0;
    for (const auto* list : {&r.layouts, &r.not_fitting})
      for (const PlannedLayout& l : *list) {
        if (l.fidelity == Fidelity::extrapolated) continue;  // refined: between the two
        INFO(l.candidate.label());
        const double bound = lb.step_s(apply(base, l.candidate));
        CHECK(bound > 0);
        CHECK(bound <= l.result.step_time_s);
        data_parallel += l.candidate.data > 1;
      }
    CHECK(data_parallel > 10);
  }
  // ZeRO-2 and 3, which a lighter stage dominates in the sweep, one by one.
  for (int64_t tp : {1, 2})
    for (int64_t pp : {1, 2})
      for (int64_t zero : {2, 3}) {
        Candidate c;
        c.tensor = tp;
        c.pipeline = pp;
        c.data = 16 / (tp * pp);
        c.zero_stage = zero;
        c.recompute = zero == 3 ? Recompute::full : Recompute::none;
        INFO(c.label());
        const double bound = lb.step_s(apply(base, c));
        CHECK(bound > 0);
        CHECK(bound <= simulate_layout(base, c, Fidelity::screened).result.step_time_s);
        CHECK(bound <= simulate_layout(base, c, Fidelity::exact).result.step_time_s);
      }
}

TEST_CASE("the probes: layer compute, and data-parallel time per layer and micro-batch", "[plan][bound]") {
  const Scenario base = sweep_base();
  Candidate c;
  c.tensor = 2;
  c.pipeline = 2;
  c.data = 4;
  const LayerCosts layer = probe_layer_costs(apply(base, c));
  CHECK(layer.layer_fwd_us > 0);
  CHECK(layer.layer_bwd_us > layer.layer_fwd_us);  // a backward is about twice a forward
  CHECK(layer.embedding_fwd_us > 0);
  CHECK(layer.head_fwd_us > 0);

  c.data = 1;
  const DpCosts none = probe_dp_costs(apply(base, c));
  CHECK(none.layer_us == 0);
  CHECK(none.layer_mb_us == 0);
  c.data = 4;
  c.zero_stage = 1;
  const DpCosts z1 = probe_dp_costs(apply(base, c));
  CHECK(z1.layer_us > 0);
  CHECK(z1.layer_mb_us == Approx(0).margin(1e-9));  // reduced once a step
  c.zero_stage = 3;
  const DpCosts z3 = probe_dp_costs(apply(base, c));
  CHECK(z3.layer_mb_us > 0);  // parameters gathered and gradients reduced every micro-batch
}

TEST_CASE("pruning by the bound keeps every layout shown, in order and figures", "[plan][bound]") {
  const Scenario base = sweep_base();
  PlanOptions pruned = every_layout(false), full = every_layout(false);
  pruned.prune = true;
  pruned.top = 5;
  pruned.refine = 8;
  full.top = 5;
  full.refine = 8;
  const PlanResult a = plan(base, pruned), b = plan(base, full);
  CHECK(a.pruned_bound > 0);
  CHECK(b.pruned_bound == 0);
  CHECK(a.considered == b.considered);
  CHECK(a.simulated + a.pruned_bound == b.simulated);
  REQUIRE(a.layouts.size() >= pruned.top);
  for (size_t i = 0; i < pruned.top; ++i) {
    INFO(i);
    CHECK(a.layouts[i].candidate.key() == b.layouts[i].candidate.key());
    CHECK(a.layouts[i].result.step_time_s == b.layouts[i].result.step_time_s);
    CHECK(a.layouts[i].fidelity == b.layouts[i].fidelity);
  }
}
