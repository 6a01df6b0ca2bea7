// tests/exec — the `--verify` references (exec/verify_refs.hpp) fail when an op's output is
// wrong: a step on one rank whose every sampled op has its outputs' first element pushed far
// off must show every reference category failing, and the same step untouched must pass.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include "exec/backends.hpp"
#include "exec/cpu/cpu_math.hpp"
#include "exec/runtime.hpp"
#include "exec/verify.hpp"
#include "exec_test_util.hpp"

using namespace paralab;
using namespace paralab::exec;

namespace {

// Runs the OpChecker on every op it samples; with `corrupt`, first moves every element of every
// output by more than the output's own largest magnitude (a normalized error above 1, whichever
// elements a reference checks: attn_dk writes only d_qkv's K columns, rmsnorm's statistics only
// their second column).
class Corrupter final : public OpObserver {
 public:
  Corrupter(OpChecker& checker, bool corrupt) : checker_(checker), corrupt_(corrupt) {}
  bool wants(const Op& op) override { return checker_.wants(op); }
  void before(const OpCall& call) override { checker_.before(call); }
  void after(const OpCall& call) override {
    for (size_t w = 0; corrupt_ && w < call.writes.size(); ++w) {
      const ResolvedRef& r = call.plan.writes[w];
      if (r.numel == 0 || (r.dtype != DType::f32 && r.dtype != DType::bf16 && r.dtype != DType::f16)) continue;
      float big = 0;
      for (int64_t i = 0; i < r.numel; ++i) big = std::max(big, std::abs(cpu::load(call.writes[w], r.dtype, i)));
      for (int64_t i = 0; i < r.numel; ++i) cpu::store(call.writes[w], r.dtype, i, cpu::load(call.writes[w], r.dtype, i) + 2 * big + 1);
    }
    checker_.after(call);
  }

 private:
  OpChecker& checker_;
  bool corrupt_;
};

VerifyReport run_checked(const StepIR& ir, bool corrupt) {
  const RankPlan plan = plan_rank(ir, 0, false);
  auto world = make_self_transport();
  auto backend = make_backend("cpu", ir, 0);
  backend->setup(plan, *world);
  OpChecker checker(plan, *backend, 1);  // every op that has a reference
  Corrupter obs(checker, corrupt);
  RuntimeOptions ro;
  ro.observer = &obs;
  ro.watchdog_s = 30;
  Runtime rt(plan, *backend, *world, ro);
  rt.initialize();
  (void)rt.run_step(1);
  return checker.report();
}

}  // namespace

TEST_CASE("verify: the references catch a wrong output of every op kind they check", "[exec][verify]") {
  // GPT (LayerNorm, GELU, dropout, learned positions, fused attention, Adam) and Llama (RMSNorm,
  // SwiGLU, RoPE, GQA) on one rank, fp32.
  for (const auto& sets : {std::vector<std::string>{"parallel.tensor=1", "cluster.devices_per_node=1"},
                           std::vector<std::string>{"parallel.tensor=1", "cluster.devices_per_node=1", "training.attention=unfused"}}) {
    CAPTURE(sets);
    const StepIR ir = build_step_ir(test::scenario("cpu-tp2", sets));
    const VerifyReport clean = run_checked(ir, false);
    CHECK(clean.failed() == 0);
    const VerifyReport bad = run_checked(ir, true);
    int64_t kinds = 0;
    for (const auto& [name, cat] : bad.categories) {
      if (name.rfind("ops.", 0) != 0 || name == "ops.dropout_mask") continue;
      CAPTURE(name, cat.passed, cat.total);
      CHECK(cat.total > 0);
      CHECK(cat.passed == 0);
      ++kinds;
    }
    CHECK(kinds >= 12);
  }
  const StepIR llama = build_step_ir(test::scenario(
      "cpu-dp2-zero2", {"parallel.data=1", "parallel.zero_stage=0", "cluster.devices_per_node=1", "training.precision=fp32"}));
  CHECK(run_checked(llama, false).failed() == 0);
  const VerifyReport bad = run_checked(llama, true);
  for (const char* kind : {"ops.rmsnorm_fwd", "ops.rmsnorm_bwd", "ops.swiglu_fwd", "ops.swiglu_bwd", "ops.rope_fwd", "ops.rope_bwd"}) {
    CAPTURE(kind);
    REQUIRE(bad.categories.count(kind) == 1);
    CHECK(bad.categories.at(kind).passed == 0);
  }
}
