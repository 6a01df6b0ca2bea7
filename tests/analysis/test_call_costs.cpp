// paralab tests — per-class call costs (CalibrationResult::call_costs, the calibrated
// topology's [[calibration.call]] points): the in-situ samples carry their collective's kind,
// group and phase; a class with 20 awake calls gets its own cost, the others keep the pooled
// one; the wake time is taken beyond each call's own cost; the file loads back and the
// simulator then predicts each class at its cost.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "analysis/calibrate.hpp"
#include "analysis/in_situ.hpp"
#include "analysis/lad_fit.hpp"
#include "exec/comm.hpp"
#include "ir/step_ir.hpp"
#include "ir/topology_loader.hpp"
#include "sim/simulate.hpp"
#include "../ir/test_util.hpp"
#include "calibrate_test_util.hpp"

using namespace paralab;
using namespace paralab::calib;
using namespace paralab::calib::testing;

// Every collective's sample names its op's kind, group and phase; a transfer's none.
TEST_CASE("in situ, a collective's sample carries its kind, group and phase", "[analysis][calibrate]") {
  const StepIR ir = build_step_ir(test::scenario_from(cpu_scenario("cpu-host", 2, 2)));
  const sim::Simulation sim = sim::simulate(ir);
  InSituSamples in;
  collect_in_situ(ir, sim.result, "execution test", in);
  std::set<CallClass> seen;
  size_t transfers = 0;
  REQUIRE_FALSE(in.comm.empty());
  for (const CommSample& c : in.comm) {
    const Op& op = ir.graph_for(c.rank).op(static_cast<OpId>(c.op));
    CAPTURE(op.full_name());
    if (const CollectiveAttrs* col = op.collective()) {
      REQUIRE(c.call_class);
      CHECK(*c.call_class == CallClass{col->kind, col->group, op.phase});
      seen.insert(*c.call_class);
    } else {
      CHECK_FALSE(c.call_class);
      ++transfers;
    }
  }
  CHECK(transfers > 0);  // pipeline receives
  // Tensor parallelism without sequence parallelism: forward and backward TP all-reduces.
  CHECK(seen.count({CollKind::all_reduce, GroupKind::tp, Phase::forward}) == 1);
  CHECK(seen.count({CollKind::all_reduce, GroupKind::tp, Phase::backward}) == 1);
}

// Awake TP all-reduces of one size: 30 forward ones 40..69 us beyond the fit, 30 backward ones
// 200..229 us, 5 DP ones 90 us (too few for a class of their own), and 25 backward ones whose
// poller slept, 500 us beyond it. The two TP classes get their own costs (their weighted
// medians), the DP calls keep the pooled cost, and the wake time is the sleepers' time beyond
// their class's cost, not beyond the pooled one.
TEST_CASE("in situ, a collective class with 20 awake calls sets its own per-call cost", "[analysis][calibrate]") {
  const StepIR base_ir = build_step_ir(test::scenario_from(cpu_scenario("cpu-host")));
  CalibrationResult r = synthetic_result(base_ir);
  const double fit = r.comm_fit.predict_us(CommPattern::all_reduce, 2, 16384);
  const CallClass fwd{CollKind::all_reduce, GroupKind::tp, Phase::forward};
  const CallClass bwd{CollKind::all_reduce, GroupKind::tp, Phase::backward};
  const CallClass dp{CollKind::all_reduce, GroupKind::dp, Phase::backward};
  auto call = [&](double extra, const CallClass& cls, double waited_us = 0.0) {
    CommSample c{CommPattern::all_reduce, 2, 16384, fit + extra, 1, waited_us, waited_us};
    c.call_class = cls;
    r.in_situ.comm.push_back(c);
  };
  for (double e : range_us(40, 30)) call(e, fwd);
  for (double e : range_us(200, 30)) call(e, bwd);
  for (int i = 0; i < 5; ++i) call(90, dp);
  for (int i = 0; i < 25; ++i) call(500 + 10.0 * (i % 3 - 1), bwd, exec::kPollSpinUs + 100.0);
  fit_all(r);
  REQUIRE(r.have_in_situ_comm());
  CHECK(r.comm_in_situ_bytes_slowdown == 0.0);  // one size of call
  CHECK(r.in_situ_awake_calls == 65);
  CHECK(r.in_situ_asleep_calls == 25);
  std::vector<double> awake = range_us(40, 30);
  for (double e : range_us(200, 30)) awake.push_back(e);
  awake.insert(awake.end(), 5, 90.0);
  CHECK(r.comm_in_situ_extra_us == Approx(weighted_extra(awake, fit)));
  REQUIRE(r.call_costs.size() == 2);
  const double fwd_extra = weighted_extra(range_us(40, 30), fit), bwd_extra = weighted_extra(range_us(200, 30), fit);
  CHECK(r.call_costs[0].cls == fwd);  // in (kind, group, phase) order
  CHECK(r.call_costs[0].calls == 30);
  CHECK(r.call_costs[0].extra_us == Approx(fwd_extra));
  CHECK(r.call_costs[1].cls == bwd);
  CHECK(r.call_costs[1].extra_us == Approx(bwd_extra));
  CHECK(r.wake_us == Approx(500 - bwd_extra));  // beyond the pooled cost it would be ~440 us
  // Each class's calls' median time as executed (the awake ones; what validate compares with).
  CHECK(r.call_costs[0].executed_us == Approx(fit + 54.5));
  CHECK(r.call_costs[1].executed_us == Approx(fit + 214.5));

  // The file: a point per class, launch = the sweep's launch + the class's extra; it loads.
  const std::string toml = topology_toml(r);
  CHECK(toml.find("[[calibration.call]]  # in situ: 30 executed calls") != std::string::npos);
  test::TempFile file(toml, "calibrated-calls.toml");
  const Topology t = load_topology(file.path());
  REQUIRE(t.calibration.calls.size() == 2);
  CHECK(t.calibration.calls[0].collective == CollKind::all_reduce);
  CHECK(t.calibration.calls[0].group == GroupKind::tp);
  CHECK(t.calibration.calls[0].phase == Phase::forward);
  CHECK(t.calibration.calls[0].launch_lat_us == Approx(r.comm_fit.launch_us + fwd_extra).epsilon(1e-5));
  CHECK(t.calibration.calls[1].phase == Phase::backward);
  CHECK(t.calibration.calls[1].launch_lat_us == Approx(r.comm_fit.launch_us + bwd_extra).epsilon(1e-5));
  CHECK(t.calibration.calls[0].executed_us == Approx(fit + 54.5).epsilon(1e-5));
  CHECK(t.calibration.calls[1].executed_us == Approx(fit + 214.5).epsilon(1e-5));
  CHECK(t.collectives.launch_lat_us == Approx(r.comm_fit.launch_us + r.comm_in_situ_extra_us).epsilon(1e-5));
  CHECK(t.collectives.wake_us == Approx(r.wake_us).epsilon(1e-5));

  // Without classes (samples of an older kind, or transfers) nothing changes: no points.
  CalibrationResult plain = synthetic_result(base_ir);
  for (double e : range_us(40, 30)) plain.in_situ.comm.push_back({CommPattern::all_reduce, 2, 16384, fit + e, 1, 0.0, 0.0});
  fit_all(plain);
  CHECK(plain.call_costs.empty());
  CHECK(calibrated_topology(plain).calibration.calls.empty());
}

// The calibrated points reach the simulator: a scenario of forward and backward TP
// all-reduces simulated on a topology whose backward class costs 300 us more than launch_lat_us
// predicts each backward call 300 us longer and leaves the forward ones as they were.
TEST_CASE("in situ, the simulator predicts each call class at its calibrated cost", "[analysis][calibrate]") {
  Scenario s = test::scenario_from(cpu_scenario("cpu-host"));
  const StepIR ir = build_step_ir(s);
  const StepResult base = sim::simulate(ir).result;
  s.topology.calibration.calls = {{CollKind::all_reduce, GroupKind::tp, Phase::backward, s.topology.collectives.launch_lat_us + 300}};
  const StepIR pointed_ir = build_step_ir(s);
  const StepResult pointed = sim::simulate(pointed_ir).result;
  REQUIRE(base.ops.size() == pointed.ops.size());
  size_t fwd = 0, bwd = 0;
  for (size_t i = 0; i < base.ops.size(); ++i) {
    const Op& op = ir.graph_for(base.ops[i].rank).op(base.ops[i].op);
    const CollectiveAttrs* col = op.collective();
    if (!col || col->kind != CollKind::all_reduce || col->group != GroupKind::tp) continue;
    const double before = base.ops[i].end_us - base.ops[i].start_us, after = pointed.ops[i].end_us - pointed.ops[i].start_us;
    CAPTURE(op.full_name());
    if (op.phase == Phase::backward) {
      CHECK(after == Approx(before + 300).margin(1e-6));
      ++bwd;
    } else {
      CHECK(after == Approx(before).margin(1e-6));
      ++fwd;
    }
  }
  CHECK(fwd > 0);
  CHECK(bwd > 0);
  CHECK(pointed.step_time_s > base.step_time_s);
}
