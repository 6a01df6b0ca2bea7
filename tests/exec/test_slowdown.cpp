// tests/exec — a slowed rank (exec/slowdown.hpp): the repetition plan's counts, spread and
// determinism, and that the extra runs change no result (they write into scratch), on one rank.
#include <catch2/catch.hpp>

#include <cmath>

#include "exec/backends.hpp"
#include "exec/error.hpp"
#include "exec/execute.hpp"
#include "exec/slowdown.hpp"
#include "exec_test_util.hpp"

using namespace paralab;
using namespace paralab::exec;
using namespace paralab::exec::test;

namespace {

StepIR one_rank(const char* name, std::vector<std::string> sets) {
  sets.push_back("cluster.devices_per_node=1");
  return build_step_ir(scenario(name, sets));
}

// The repeatable ops of g, in op-id order.
std::vector<OpId> repeatable(const StepGraph& g) {
  std::vector<OpId> out;
  for (const Op& op : g.ops)
    if (repeats_when_slowed(op.kind)) out.push_back(op.id);
  return out;
}

}  // namespace

TEST_CASE("slowdown plan: whole factors repeat every compute op, never communication", "[exec][slowdown]") {
  const StepIR ir = build_step_ir(scenario("cpu-tp2"));  // tensor parallel: all-reduces between the GEMMs
  const StepGraph& g = ir.graph_for(0);
  const std::vector<OpId> rep = repeatable(g);
  REQUIRE(rep.size() > 20);
  REQUIRE(rep.size() < g.ops.size());  // the graph has communication

  const SlowdownPlan one = plan_slowdown(g, 1.0);
  for (const Op& op : g.ops) CHECK(one.runs_of(op.id) == 1);
  CHECK(one.extra_runs() == 0);

  for (const double f : {2.0, 3.0}) {
    const SlowdownPlan p = plan_slowdown(g, f);
    for (const Op& op : g.ops) {
      CAPTURE(op.full_name(), f);
      CHECK(p.runs_of(op.id) == (repeats_when_slowed(op.kind) ? static_cast<int32_t>(f) : 1));
      if (is_comm(op.kind)) CHECK(p.runs_of(op.id) == 1);
    }
    CHECK(p.extra_runs() == static_cast<int64_t>(rep.size()) * static_cast<int64_t>(f - 1));
  }
  CHECK_FALSE(repeats_when_slowed(OpKind::collective));
  CHECK_FALSE(repeats_when_slowed(OpKind::sendrecv));
  CHECK_FALSE(repeats_when_slowed(OpKind::scaler_update));
  CHECK_FALSE(repeats_when_slowed(OpKind::xent_loss));
  CHECK(repeats_when_slowed(OpKind::gemm));
  CHECK(repeats_when_slowed(OpKind::optimizer_step));
}

TEST_CASE("slowdown plan: a fraction picks round(n * frac) ops, evenly, the same every time", "[exec][slowdown]") {
  const StepIR ir = build_step_ir(scenario("cpu-tp2"));
  const StepGraph& g = ir.graph_for(0);
  const std::vector<OpId> rep = repeatable(g);
  const auto n = static_cast<double>(rep.size());
  for (const double f : {2.5, 1.3, 1.01, 3.75}) {
    CAPTURE(f);
    const SlowdownPlan p = plan_slowdown(g, f);
    const double frac = f - std::floor(f);
    int64_t more = 0;
    for (size_t j = 0; j < rep.size(); ++j) {
      const int32_t r = p.runs_of(rep[j]);
      REQUIRE((r == static_cast<int32_t>(std::floor(f)) || r == static_cast<int32_t>(std::floor(f)) + 1));
      more += r > std::floor(f) ? 1 : 0;
      // Evenly: after j+1 ops, the ops picked are within one of (j+1) * frac.
      CHECK(std::abs(static_cast<double>(more) - static_cast<double>(j + 1) * frac) <= 1.0);
    }
    CHECK(more == static_cast<int64_t>(std::floor(n * frac + 0.5)));
    CHECK(p.runs == plan_slowdown(g, f).runs);  // deterministic
    // The mean over the repeatable ops is F to within one op's share.
    const double mean = (n + static_cast<double>(p.extra_runs())) / n;
    CHECK(std::abs(mean - f) <= 1.0 / n);
  }
  // F = 2.5: every other op runs thrice.
  const SlowdownPlan half = plan_slowdown(g, 2.5);
  int64_t thrice = 0;
  for (OpId id : rep) thrice += half.runs_of(id) == 3 ? 1 : 0;
  CHECK(std::abs(static_cast<double>(thrice) - n / 2) <= 0.5);
  for (size_t j = 1; j < rep.size(); ++j) CHECK(half.runs_of(rep[j]) + half.runs_of(rep[j - 1]) == 5);

  CHECK_THROWS_AS(plan_slowdown(g, 0.5), InternalError);
  CHECK_THROWS_AS(plan_slowdown(g, kMaxSlowdown + 1), InternalError);
  CHECK_THROWS_AS(plan_slowdown(g, std::nan("")), InternalError);
}

TEST_CASE("slowdown scratch: one block per stream, as large as its largest repeated op's outputs", "[exec][slowdown]") {
  const StepIR ir = one_rank("cpu-dp2-zero2", {"parallel.data=1"});
  const RankPlan plan = plan_rank(ir, 0, false);
  const SlowdownPlan slow = plan_slowdown(*plan.graph, 2.0);
  int64_t most = 0;
  for (OpId id : plan.graph->streams[0]) most = std::max(most, slow.runs_of(id) > 1 ? repeat_scratch_bytes(plan.ops[id]) : 0);
  REQUIRE(most > 0);
  // Each view gets its bytes and room for any offset below 256.
  for (const Op& op : plan.graph->ops) {
    int64_t raw = 0;
    for (const ResolvedRef& w : plan.ops[op.id].writes) raw += w.numel * bytes_of(w.dtype);
    const auto views = static_cast<int64_t>(plan.ops[op.id].writes.size());
    CHECK(repeat_scratch_bytes(plan.ops[op.id]) >= raw + 256 * views);
    CHECK(repeat_scratch_bytes(plan.ops[op.id]) < raw + 512 * views + 1);
  }
  // The scratch views keep the real views' alignment modulo 256 and do not overlap.
  auto world = make_self_transport();
  std::unique_ptr<Backend> cpu = make_backend("cpu", ir, 0);
  cpu->setup(plan, *world);
  RepeatScratch scratch(slow, plan, *cpu);
  CHECK(scratch.bytes(Stream::compute) == most);
  for (OpId id : plan.graph->streams[0]) {
    if (slow.runs_of(id) < 2 || plan.ops[id].writes.size() < 2) continue;
    const OpPlan& o = plan.ops[id];
    std::vector<void*> real;
    for (size_t i = 0; i < o.writes.size(); ++i) real.push_back(reinterpret_cast<void*>(uintptr_t{4096} * 7 + 2 * i + 64 * i));
    const std::span<void* const> w = scratch.writes(Stream::compute, o, real);
    REQUIRE(w.size() == o.writes.size());
    for (size_t i = 0; i < w.size(); ++i) {
      CHECK(reinterpret_cast<uintptr_t>(w[i]) % 256 == reinterpret_cast<uintptr_t>(real[i]) % 256);
      if (i > 0) {
        const auto prev_end = reinterpret_cast<uintptr_t>(w[i - 1]) + static_cast<uintptr_t>(o.writes[i - 1].numel * bytes_of(o.writes[i - 1].dtype));
        CHECK(reinterpret_cast<uintptr_t>(w[i]) >= prev_end);
      }
    }
    break;
  }
}

TEST_CASE("a slowed rank: the extra runs change no result, and verification passes", "[exec][slowdown]") {
  // Two SGD/Adam steps: the second step's loss depends on the first step's gradients (which
  // accumulate), the reductions and the in-place update; fp16 adds the loss-scale state.
  const char* const cases[][2] = {{"cpu-dp2-zero2", "parallel.data=1"}, {"cpu-1rank-fp16", "training.seed=7"}};
  for (const auto& c : cases) {
    for (const double f : {2.0, 2.5}) {
      CAPTURE(c[0], f);
      const StepIR ir = one_rank(c[0], {c[1]});
      auto world = make_self_transport();
      ExecuteOptions o;
      o.steps = 2;
      o.watchdog_s = 60;
      const ExecuteOutcome base = execute(ir, *world, o);
      o.slow_rank = 0;
      o.slowdown = f;
      o.verify = true;
      const ExecuteOutcome slow = execute(ir, *world, o);
      REQUIRE(slow.root);
      CHECK_FALSE(slow.verify_failed);
      CHECK(slow.loss == base.loss);  // bit for bit: the real run of every op is its only one
      REQUIRE(slow.ranks.size() == 1);
      CHECK(slow.ranks[0].extra_runs == plan_slowdown(ir.graph_for(0), f).extra_runs());
      CHECK(slow.ranks[0].extra_runs > 0);
      CHECK(base.ranks[0].extra_runs == 0);
      CHECK(slow.result.ops.size() == base.result.ops.size());  // one timing per op, covering its runs
      CHECK(outcome_json(slow).at("slowdown").at("factor").get<double>() == f);
    }
  }
}

TEST_CASE("a slowed rank: bad ranks and factors are refused by name", "[exec][slowdown]") {
  const StepIR ir = one_rank("cpu-1rank-fp16", {});
  auto world = make_self_transport();
  ExecuteOptions o;
  o.slow_rank = 1;  // one rank: only 0 exists
  o.slowdown = 2;
  CHECK_THROWS_WITH(execute(ir, *world, o), Catch::Contains("the slowed rank must be one of 0 .. 0"));
  o.slow_rank = 0;
  o.slowdown = 0.5;
  CHECK_THROWS_WITH(execute(ir, *world, o), Catch::Contains("the slowdown must be in [1, 100]"));
}
