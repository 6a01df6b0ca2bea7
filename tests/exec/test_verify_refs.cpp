// tests/exec — the `--verify` references (exec/verify_refs.hpp) fail when an op's output is
// wrong: a step on one rank whose every sampled op has its outputs' first element pushed far
// off must show every reference category failing, and the same step untouched must pass.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "exec/backends.hpp"
#include "exec/cpu/cpu_math.hpp"
#include "exec/runtime.hpp"
#include "exec/verify.hpp"
#include "exec/verify_refs.hpp"
#include "exec_test_util.hpp"
#include "ir/enum_names.hpp"

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

// Passes the ops to the checker only while `on`.
class Gate final : public OpObserver {
 public:
  explicit Gate(OpChecker& checker) : checker_(checker) {}
  bool on = false;
  bool wants(const Op& op) override { return on && checker_.wants(op); }
  void before(const OpCall& call) override { checker_.before(call); }
  void after(const OpCall& call) override { checker_.after(call); }

 private:
  OpChecker& checker_;
};

// The report categories a step of `ir` must produce with every op sampled: one per kind that has
// a reference among the graph's ops (verify_detail::has_reference).
std::set<std::string> expected_categories(const StepIR& ir) {
  std::set<std::string> out;
  for (const Op& op : ir.graph_for(0).ops)
    if (verify_detail::has_reference(op)) out.insert("ops." + std::string(enum_to_string(op.kind)));
  return out;
}

// One step on one rank of the CPU backend, every op that has a reference checked, through an
// Observer(checker, arg) that may alter outputs before the checker sees them.
template <class Observer, class Arg>
VerifyReport run_observed(const StepIR& ir, Arg arg) {
  const RankPlan plan = plan_rank(ir, 0, false);
  auto world = make_self_transport();
  auto backend = make_backend("cpu", ir, 0);
  backend->setup(plan, *world);
  OpChecker checker(plan, *backend, 1);  // every op that has a reference
  Observer obs(checker, arg);
  RuntimeOptions ro;
  ro.observer = &obs;
  ro.watchdog_s = 30;
  Runtime rt(plan, *backend, *world, ro);
  rt.initialize();
  (void)rt.run_step(1);
  return checker.report();
}

VerifyReport run_checked(const StepIR& ir, bool corrupt) { return run_observed<Corrupter>(ir, corrupt); }

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
    // Every kind of the step that has a reference is checked, and fails.
    const std::set<std::string> want = expected_categories(ir);
    CHECK(want.size() >= 15);
    for (const std::string& name : want) {
      CAPTURE(name);
      REQUIRE(bad.categories.count(name) == 1);
      CHECK(bad.categories.at(name).passed == 0);
    }
    for (const auto& [name, cat] : bad.categories)
      if (name.rfind("ops.", 0) == 0 && name != "ops.dropout_mask") CHECK(want.count(name) == 1);
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

TEST_CASE("verify: every kind but communication, the fp16 flag, the loss-scale update and launches has a reference",
          "[exec][verify]") {
  for (size_t i = 0; i < static_cast<size_t>(OpKind::kCount); ++i) {
    const auto k = static_cast<OpKind>(i);
    CAPTURE(to_string(k));
    // A launch (nn.DataParallel's host time) writes nothing to check.
    CHECK(verify_detail::ref_table().has(k) ==
          (!is_comm(k) && k != OpKind::overflow_check && k != OpKind::scaler_update && k != OpKind::launch));
  }
}

TEST_CASE("fp16: after the loss scale backs off, the gradients are scaled by the same scale the optimizer divides by",
          "[exec][verify]") {
  // An initial loss scale of 2^32 overflows fp16 gradients: the scaler halves it on every
  // overflowed step (skipping the update) until the gradients fit, and training proceeds. With
  // the initial scale baked into the cross-entropy gradient, every step overflowed and none
  // updated the weights.
  const StepIR ir = build_step_ir(test::scenario("cpu-1rank-fp16", {"training.initial_loss_scale=4294967296"}));
  const RankPlan plan = plan_rank(ir, 0, false);
  auto world = make_self_transport();
  auto backend = make_backend("cpu", ir, 0);
  backend->setup(plan, *world);
  OpChecker checker(plan, *backend, 1);
  Gate gate(checker);  // references only once the scale has settled: overflowed steps are inf by design
  RuntimeOptions ro;
  ro.observer = &gate;
  ro.watchdog_s = 30;
  Runtime rt(plan, *backend, *world, ro);
  rt.initialize();
  std::vector<double> loss, scale;
  for (int64_t step = 1; step <= 40; ++step) {
    gate.on = step > 35;
    const StepRun run = rt.run_step(step);
    REQUIRE(run.loss_tokens > 0);
    loss.push_back(run.loss_sum / static_cast<double>(run.loss_tokens));
    scale.push_back(backend->loss_scale());
  }
  CAPTURE(scale.front(), scale.back(), loss.front(), loss.back());
  CHECK(scale.back() < scale.front());  // backed off (here to 2^18, where these gradients fit)
  CHECK(scale.back() >= 1.0);
  CHECK(scale[34] == scale.back());    // settled before the checked steps
  CHECK(loss.back() < loss.front());   // the weights moved, and the loss went down
  const VerifyReport r = checker.report();
  for (const auto& f : r.failures) UNSCOPED_INFO(f);
  CHECK(r.failed() == 0);  // xent_bwd against the backend's scale at the time, among others
  REQUIRE(r.categories.count("ops.xent_bwd") == 1);
  CHECK(r.categories.at("ops.xent_bwd").total > 0);
}

namespace {

// Scales every element of a linear layer's product (output 0) by 1 + delta or 1 - delta,
// alternately, as a relative rounding would: a normalized error of `delta` at most (and about
// `delta` where the largest element checked is moved).
class LinearNudger final : public OpObserver {
 public:
  LinearNudger(OpChecker& checker, float delta) : checker_(checker), delta_(delta) {}
  bool wants(const Op& op) override { return checker_.wants(op); }
  void before(const OpCall& call) override { checker_.before(call); }
  void after(const OpCall& call) override {
    const GemmAttrs* g = call.op.gemm();
    if (g && is_linear(g->role)) {
      const ResolvedRef& r = call.plan.writes[0];
      for (int64_t i = 0; i < r.numel; ++i)
        cpu::store(call.writes[0], r.dtype, i, cpu::load(call.writes[0], r.dtype, i) * (1 + (i % 2 ? delta_ : -delta_)));
    }
    checker_.after(call);
  }

 private:
  OpChecker& checker_;
  float delta_;
};

VerifyReport run_nudged(const StepIR& ir, float delta) { return run_observed<LinearNudger>(ir, delta); }

}  // namespace

TEST_CASE("verify: an FP8 linear layer is held to e4m3's rounding (0.1), a bf16 one to 2e-2", "[exec][verify]") {
  // The CPU backend runs FP8's linear layers in bf16; the nudge stands in for e4m3's rounding
  // (a normalized error of ~3-5 % on random data, exec/verify_ops.cpp) and for a real fault.
  auto ir_of = [](const char* precision) {
    return build_step_ir(test::scenario("cpu-tp2", {"parallel.tensor=1", "cluster.devices_per_node=1",
                                                    "cluster.topology=dgx-h100", std::string("training.precision=") + precision}));
  };
  const StepIR fp8 = ir_of("fp8"), bf16 = ir_of("bf16");
  auto gemm = [](const VerifyReport& r) {
    REQUIRE(r.categories.count("ops.gemm") == 1);
    return r.categories.at("ops.gemm");
  };
  const auto fp8_small = gemm(run_nudged(fp8, 0.05f));
  CHECK(fp8_small.passed == fp8_small.total);
  CHECK(fp8_small.max_error > 0.04);  // the nudge was seen
  const auto bf16_small = gemm(run_nudged(bf16, 0.05f));
  CHECK(bf16_small.passed < bf16_small.total);  // the linear layers' products fail, the attention ones pass
  const auto fp8_big = gemm(run_nudged(fp8, 0.3f));
  CHECK(fp8_big.passed < fp8_big.total);
}
