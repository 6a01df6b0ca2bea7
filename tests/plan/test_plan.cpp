// paralab tests — the planner: enumeration and pinning, the memory model against the IR's own
// replay, determinism whatever the thread count, ranking, the Pareto front, and the
// extrapolated fidelities against exact simulation.
#include <catch2/catch.hpp>

#include <set>

#include "ir/accounting.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/step_ir.hpp"
#include "plan/memory_estimate.hpp"
#include "plan/planner.hpp"
#include "../ir/test_util.hpp"

using namespace paralab;

namespace {

Scenario base_scenario(const std::string& extra = "", std::vector<std::string> sets = {}) {
  const std::string toml = "[model]\npreset = \"tiny\"\n[training]\nglobal_batch_size = 32\n" + extra +
                           "[cluster]\ntopology = \"dgx-a100\"\nnodes = 1\n";
  test::TempFile f(toml);
  return load_scenario(f.path(), sets, /*check_layout=*/false);
}

std::string signature(const PlanResult& r) {
  std::string s;
  for (const auto& l : r.layouts) s += l.candidate.key() + "=" + std::to_string(l.result.step_time_s) + ";";
  return s;
}

Scenario dp_base(const std::string& impl) {
  const std::string f = std::string(PARALAB_SOURCE_DIR) + "/bench/sim/dataparallel/seed-resnet50-size.toml";
  return load_scenario(f, {"parallel.data_parallel_impl=" + impl});
}

}  // namespace

TEST_CASE("the memory model stays close to the IR's replay", "[plan][memory]") {
  const std::vector<std::vector<std::string>> cases = {
      {"parallel.tensor=8", "parallel.pipeline=16", "training.global_batch_size=512"},
      {"parallel.tensor=8", "parallel.pipeline=16", "training.global_batch_size=512", "training.recompute=full"},
      {"parallel.tensor=4", "parallel.pipeline=8", "training.global_batch_size=512", "parallel.zero_stage=3",
       "parallel.sequence_parallel=true"},
      {"parallel.tensor=8", "parallel.pipeline=8", "parallel.virtual_pipeline_stages=2",
       "parallel.schedule=interleaved", "training.global_batch_size=512"},
      {"parallel.tensor=8", "parallel.pipeline=16", "training.global_batch_size=256", "parallel.schedule=gpipe"},
      {"parallel.tensor=8", "parallel.pipeline=16", "training.global_batch_size=512", "training.attention=unfused"},
  };
  for (const auto& sets : cases) {
    std::string label;
    for (const auto& x : sets) label += x + " ";
    INFO(label);
    const std::string toml = "[model]\npreset = \"gpt3-175b\"\nseq_length = 1024\n[training]\nglobal_batch_size = 512\n"
                             "[cluster]\ntopology = \"dgx-a100\"\nnodes = 32\n";
    const Scenario s = test::scenario_from(toml, sets);
    const double est = estimate_memory(s).peak_bytes;
    const double ir = summarize(build_step_ir(s)).peak_memory_bytes;
    // Within 10%, and on the safe side by design (it prunes).
    CHECK(est == Approx(ir).epsilon(0.10));
    CHECK(est >= 0.97 * ir);
  }
}

TEST_CASE("enumeration honours pinned keys and counts what the bounds leave out", "[plan][search]") {
  const Scenario pinned = base_scenario("[parallel]\ntensor = 2\n");
  const SearchSpace sp = search_space(pinned, SearchBounds{});
  CHECK(sp.tensor == std::vector<int64_t>{2});
  std::map<std::string, int64_t> excluded;
  std::set<int64_t> tps;
  int64_t n = 0;
  enumerate(pinned, sp, SearchBounds{}, [&](const Candidate& c) {
    tps.insert(c.tensor);
    CHECK(c.tensor * c.pipeline * c.context * c.data == 8);
    ++n;
  }, excluded);
  CHECK(tps == std::set<int64_t>{2});
  CHECK(n > 50);

  const Scenario free = base_scenario();
  SearchBounds tight;
  tight.max_micro_batch = 2;
  std::map<std::string, int64_t> ex2;
  int64_t m = 0;
  enumerate(free, search_space(free, tight), tight, [&](const Candidate& c) {
    CHECK(c.micro_batch <= 2);
    ++m;
  }, ex2);
  CHECK(m > 0);
  bool saw_mb_bound = false;
  for (const auto& [why, count] : ex2) saw_mb_bound |= why.find("--max-micro-batch") != std::string::npos && count > 0;
  CHECK(saw_mb_bound);
}

// 6 layers do not split over 4 or 8 stages, but do with the embedding and loss counted as
// layers (8 = 4 x 2 = 8 x 1), as Megatron-LM runs Llama 3.1 405B's 126 layers on 8 stages.
TEST_CASE("the search counts the embedding and loss as layers where that makes a split", "[plan][search]") {
  const Scenario six = base_scenario("", {"model.num_layers=6"});
  std::map<std::string, int64_t> excluded;
  std::map<int64_t, std::set<bool>> ends_by_pp;
  int64_t valid = 0;
  enumerate(six, search_space(six, SearchBounds{}), SearchBounds{}, [&](const Candidate& c) {
    ends_by_pp[c.pipeline].insert(c.count_ends);
    if (c.pipeline != 4 || c.virtual_stages != 1) return;
    Scenario s = apply(six, c);
    validate_scenario(s);  // throws if the split were refused
    CHECK(s.parallel.account_for_embedding_in_pipeline_split);
    CHECK(candidate_of(s).count_ends);
    CHECK(c.label().find("E+L") != std::string::npos);
    ++valid;
  }, excluded);
  CHECK(ends_by_pp[1] == std::set<bool>{false});
  CHECK(ends_by_pp[2] == std::set<bool>{false});  // 6 = 2 x 3: nothing to count
  CHECK(ends_by_pp[4] == std::set<bool>{true});
  CHECK(ends_by_pp[8] == std::set<bool>{true});
  CHECK(valid > 0);
  // A split the scenario sets is kept: with uneven stages given, no candidate counts the ends.
  const Scenario uneven = base_scenario("", {"model.num_layers=6", "parallel.decoder_first_pipeline_num_layers=1"});
  enumerate(uneven, search_space(uneven, SearchBounds{}), SearchBounds{}, [&](const Candidate& c) {
    CHECK_FALSE(c.count_ends);
  }, excluded);
}

// Interleaving with 6 micro-batches per rank on 4 stages: Megatron-LM's smallest valid group, 6.
TEST_CASE("interleaved candidates get a micro-batch group when m is not a multiple of p", "[plan][search]") {
  const Scenario b = base_scenario("", {"training.global_batch_size=24", "parallel.tensor=1", "parallel.data=2"});
  std::map<std::string, int64_t> excluded;
  int64_t seen = 0;
  enumerate(b, search_space(b, SearchBounds{}), SearchBounds{}, [&](const Candidate& c) {
    if (c.schedule != Schedule::interleaved || c.pipeline != 4) return;
    const int64_t m = 24 / (c.micro_batch * 2);
    if (m < 4) return;  // fewer micro-batches than stages: refused by validation
    CHECK(c.microbatch_group == (m % 4 == 0 ? 0 : 6));
    validate_scenario(apply(b, c));
    seen += m == 6;
  }, excluded);
  CHECK(seen > 0);
}

TEST_CASE("planning is deterministic whatever the thread count", "[plan]") {
  const Scenario s = base_scenario();
  PlanOptions one, two;
  one.threads = 1;
  two.threads = 3;
  one.bounds.max_micro_batch = two.bounds.max_micro_batch = 2;
  const PlanResult a = plan(s, one), b = plan(s, two);
  REQUIRE_FALSE(a.layouts.empty());
  CHECK(signature(a) == signature(b));
  CHECK(a.considered == b.considered);
  CHECK(a.invalid_by_reason == b.invalid_by_reason);
}

TEST_CASE("the ranking, the counts and the Pareto front are consistent", "[plan]") {
  const Scenario s = base_scenario();
  PlanOptions o;
  o.threads = 2;
  o.bounds.max_micro_batch = 4;
  const PlanResult r = plan(s, o);
  REQUIRE(r.layouts.size() > 3);
  CHECK(r.considered == r.invalid + r.pruned_memory + r.pruned_dominated + r.pruned_bound + r.simulated);
  CHECK(r.simulated == static_cast<int64_t>(r.layouts.size() + r.not_fitting.size()));
  CHECK(r.layouts[0].fidelity == Fidelity::exact);
  for (size_t i = 1; i < r.layouts.size(); ++i)
    CHECK(r.layouts[i - 1].result.tokens_per_s >= r.layouts[i].result.tokens_per_s);
  int64_t invalid = 0;
  for (const auto& [why, n] : r.invalid_by_reason) invalid += n;
  CHECK(invalid == r.invalid);
  // No layout beats a Pareto point in both step time and memory; every other layout is beaten.
  REQUIRE_FALSE(r.pareto.empty());
  std::set<size_t> front(r.pareto.begin(), r.pareto.end());
  for (size_t i = 0; i < r.layouts.size(); ++i) {
    bool beaten = false;
    for (size_t j = 0; j < r.layouts.size(); ++j) {
      const auto &a = r.layouts[i].result, &b = r.layouts[j].result;
      beaten |= b.step_time_s <= a.step_time_s && b.peak_memory_gib <= a.peak_memory_gib &&
                (b.step_time_s < a.step_time_s || b.peak_memory_gib < a.peak_memory_gib);
    }
    CHECK(beaten == (front.count(i) == 0));
  }
  CHECK(front.count(0) == 1);  // the fastest layout is on the front
}

TEST_CASE("extrapolated and screened figures track exact simulation", "[plan]") {
  // 1F1B over 4 stages with 32 micro-batches: the pipeline is full, the step is linear in m.
  const Scenario s = base_scenario();
  Candidate c;
  c.tensor = 2;
  c.pipeline = 4;
  c.data = 1;
  c.micro_batch = 1;
  const PlannedLayout exact = simulate_layout(s, c, Fidelity::exact);
  const PlannedLayout extra = simulate_layout(s, c, Fidelity::extrapolated);
  const PlannedLayout screen = simulate_layout(s, c, Fidelity::screened);
  REQUIRE(extra.fidelity == Fidelity::extrapolated);
  REQUIRE(screen.fidelity == Fidelity::screened);
  CHECK(extra.result.step_time_s == Approx(exact.result.step_time_s).epsilon(0.02));
  CHECK(screen.result.step_time_s == Approx(exact.result.step_time_s).epsilon(0.10));
  CHECK(extra.result.tokens_per_s == Approx(exact.result.tokens_per_s).epsilon(0.02));
}

TEST_CASE("a baseline is simulated exactly and explained against", "[plan]") {
  const Scenario s = base_scenario();
  PlanOptions o;
  o.threads = 2;
  o.bounds.max_micro_batch = 2;
  Candidate base;
  base.tensor = 4;
  base.data = 2;
  o.baseline = base;
  const PlanResult r = plan(s, o);
  REQUIRE(r.baseline);
  CHECK(r.baseline->fidelity == Fidelity::exact);
  CHECK(r.layouts[0].result.tokens_per_s >= r.baseline->result.tokens_per_s);
  const auto why = explain(r.layouts[0], *r.baseline);
  REQUIRE_FALSE(why.empty());
  CHECK(why[0].find("faster than") != std::string::npos);
}

// nn.DataParallel (docs/dataparallel.md): wherever it runs, DDP is faster, so the search proposes
// DDP even from a DataParallel base (the seed notes' comparison, bench/sim/dataparallel/).
TEST_CASE("the planner never proposes nn.DataParallel", "[plan][dataparallel]") {
  const Scenario dp = dp_base("dataparallel");
  PlanOptions o;
  o.top = 3;
  const PlanResult r = plan(dp, o);
  REQUIRE_FALSE(r.layouts.empty());
  for (const PlannedLayout& l : r.layouts) CHECK(apply(dp, l.candidate).parallel.data_parallel_impl == DataParallelImpl::ddp);
  // The winner is as fast as the same search from a DDP base.
  const PlanResult d = plan(dp_base("ddp"), o);
  CHECK(r.layouts.front().result.step_time_s == d.layouts.front().result.step_time_s);
}
