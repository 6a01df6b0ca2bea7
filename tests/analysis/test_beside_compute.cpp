// paralab tests — calls beside compute (CommSample::beside_compute, CallPoint::beside_lat_us):
// a class of collective whose calls that ran while their rank computed cost more gets a cost
// for those of its own, fitted from synthetic samples; the simulator charges it where its
// representative computed during the call, and the in-situ calibration reads the same calls
// back from the simulated step.
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "analysis/calibrate.hpp"
#include "analysis/in_situ.hpp"
#include "analysis/lad_fit.hpp"
#include "ir/step_ir.hpp"
#include "ir/topology_loader.hpp"
#include "sim/simulate.hpp"
#include "../ir/test_util.hpp"
#include "calibrate_test_util.hpp"

using namespace paralab;
using namespace paralab::calib;
using namespace paralab::calib::testing;

// Three classes of awake 16 KB all-reduces, 2 ranks on 1 core:
// - backward TP: 30 alone (40..69 us beyond the fit) and 30 beside compute (150..179 us): a
//   cost for each;
// - forward TP: 30 alone and 5 beside (too few for a cost of their own): one cost, over all 35;
// - backward DP: 25 alone at 100..124 us and 25 beside at 40..64 us (cheaper beside compute,
//   which only adds time on shared cores): one cost, over all 50.
TEST_CASE("in situ, a class's calls beside compute get their own cost when they cost more", "[analysis][calibrate]") {
  const StepIR base_ir = build_step_ir(test::scenario_from(cpu_scenario("cpu-host")));
  CalibrationResult r = synthetic_result(base_ir);
  r.host.cores = 1;  // 2 ranks sharing a core: the simulator's shared cores (CoreShare's node_cores)
  const double fit = r.comm_fit.predict_us(CommPattern::all_reduce, 2, 16384);
  const CallClass fwd{CollKind::all_reduce, GroupKind::tp, Phase::forward};
  const CallClass bwd{CollKind::all_reduce, GroupKind::tp, Phase::backward};
  const CallClass dp{CollKind::all_reduce, GroupKind::dp, Phase::backward};
  auto call = [&](double extra, const CallClass& cls, bool beside) {
    CommSample c{CommPattern::all_reduce, 2, 16384, fit + extra, 1, 0.0, 0.0};
    c.call_class = cls;
    c.beside_compute = beside;
    c.execution = 0;
    r.in_situ.comm.push_back(c);
  };
  for (double e : range_us(40, 30)) call(e, bwd, false);
  for (double e : range_us(150, 30)) call(e, bwd, true);
  for (double e : range_us(40, 30)) call(e, fwd, false);
  for (int i = 0; i < 5; ++i) call(200, fwd, true);
  for (double e : range_us(100, 25)) call(e, dp, false);
  for (double e : range_us(40, 25)) call(e, dp, true);
  fit_all(r);
  REQUIRE(r.have_in_situ_comm());
  REQUIRE(r.call_costs.size() == 3);  // in (kind, group, phase) order: tp fwd, tp bwd, dp bwd
  const CalibrationResult::CallCost& f = r.call_costs[0];
  const CalibrationResult::CallCost& b = r.call_costs[1];
  const CalibrationResult::CallCost& d = r.call_costs[2];
  CHECK(f.cls == fwd);
  CHECK(b.cls == bwd);
  CHECK(d.cls == dp);

  CHECK(b.calls == 60);
  CHECK(b.extra_us == Approx(weighted_extra(range_us(40, 30), fit)));
  REQUIRE(b.beside_extra_us);
  CHECK(*b.beside_extra_us == Approx(weighted_extra(range_us(150, 30), fit)));
  CHECK(b.beside_calls == 30);

  std::vector<double> fwd_all = range_us(40, 30);
  fwd_all.insert(fwd_all.end(), 5, 200.0);
  CHECK(f.calls == 35);
  CHECK_FALSE(f.beside_extra_us);
  CHECK(f.extra_us == Approx(weighted_extra(fwd_all, fit)));

  std::vector<double> dp_all = range_us(100, 25);
  for (double e : range_us(40, 25)) dp_all.push_back(e);
  CHECK_FALSE(d.beside_extra_us);
  CHECK(d.extra_us == Approx(weighted_extra(dp_all, fit)));

  // The file: the backward TP point has beside_lat_us (the sweep's launch + its extra beside
  // compute), the others none; it loads back as written.
  const std::string toml = topology_toml(r);
  CHECK(toml.find("# 30 of them ran while their rank computed") != std::string::npos);
  test::TempFile file(toml, "calibrated-beside.toml");
  const Topology t = load_topology(file.path());
  REQUIRE(t.calibration.calls.size() == 3);
  CHECK(t.calibration.calls[0].beside_lat_us == 0.0);
  CHECK(t.calibration.calls[1].launch_lat_us == Approx(r.comm_fit.launch_us + b.extra_us).epsilon(1e-5));
  CHECK(t.calibration.calls[1].beside_lat_us == Approx(r.comm_fit.launch_us + *b.beside_extra_us).epsilon(1e-5));
  CHECK(t.calibration.calls[2].beside_lat_us == 0.0);

  // The calls' tail (one execution: its calls' mean beyond their predicted time) is taken
  // beyond each call's own cost: the backward TP calls beside compute beyond theirs.
  double sum = 0;
  for (double e : range_us(40, 30)) sum += e - b.extra_us;
  for (double e : range_us(150, 30)) sum += e - *b.beside_extra_us;
  for (double e : fwd_all) sum += e - f.extra_us;
  for (double e : dp_all) sum += e - d.extra_us;
  CHECK(r.call_tail_executions == 1);
  CHECK(r.call_tail_us == Approx(sum / 145.0));
  CHECK(r.call_tail_us < (sum + 30 * (*b.beside_extra_us - b.extra_us)) / 145.0 - 20.0);  // beyond the class's: 22 us more

  // Where each rank has a core of its own, no class is split: the simulator gives a woken
  // call's thread the rank's core already (CoreShare's rank_cores).
  CalibrationResult own = r;
  own.host.cores = 2;
  fit_all(own);
  REQUIRE(own.call_costs.size() == 3);
  std::vector<double> bwd_all = range_us(40, 30);
  for (double e : range_us(150, 30)) bwd_all.push_back(e);
  CHECK_FALSE(own.call_costs[1].beside_extra_us);
  CHECK(own.call_costs[1].extra_us == Approx(weighted_extra(bwd_all, fit)));
  CHECK(topology_toml(own).find("beside_lat_us") == std::string::npos);
}

// The simulator and the in-situ calibration find the same calls beside compute. A ZeRO-3 step
// (TP 2 x DP 2, sequence parallel) simulated with a cost beside compute of launch + 400 us for
// every TP and DP all-gather and reduce-scatter class (launch_lat_us as the spec's) reads back,
// in situ, with every call found beside compute at least 400 us long and every other one shorter.
TEST_CASE("a collective beside compute pays its class's cost for it, and in situ finds the same calls",
          "[analysis][calibrate]") {
  const std::string text =
      "[model]\npreset = \"tiny\"\nnum_layers = 4\n[training]\nglobal_batch_size = 8\nmicro_batch_size = 2\n"
      "precision = \"fp32\"\n[parallel]\ntensor = 2\ndata = 2\nsequence_parallel = true\nzero_stage = 3\n"
      "[cluster]\ntopology = \"cpu-host\"\nnodes = 1\ndevices_per_node = 4\n";
  constexpr double kBeside = 400.0;
  Scenario s = test::scenario_from(text);
  s.topology.collectives.wake_us = 0.0;
  s.topology.collectives.sync_skew_us = 0.0;
  s.topology.collectives.contended_lat_us = 0.0;
  for (CollKind k : {CollKind::all_gather, CollKind::reduce_scatter})
    for (GroupKind g : {GroupKind::tp, GroupKind::dp})
      for (Phase p : {Phase::forward, Phase::backward}) {
        CallPoint c;
        c.collective = k;
        c.group = g;
        c.phase = p;
        c.launch_lat_us = s.topology.collectives.launch_lat_us;
        c.beside_lat_us = c.launch_lat_us + kBeside;
        s.topology.calibration.calls.push_back(c);
      }
  const StepIR ir = build_step_ir(s);
  const sim::Simulation sim = sim::simulate(ir);
  InSituSamples in;
  collect_in_situ(ir, sim.result, "execution test", in);
  size_t beside = 0, other = 0;
  for (const CommSample& c : in.comm) {
    if (!c.call_class) continue;
    const auto [kind, group, phase] = *c.call_class;
    if (group != GroupKind::tp && group != GroupKind::dp) continue;
    if (kind != CollKind::all_gather && kind != CollKind::reduce_scatter) continue;
    if (phase != Phase::forward && phase != Phase::backward) continue;
    const Op& op = ir.graph_for(c.rank).op(static_cast<OpId>(c.op));
    CAPTURE(op.full_name(), c.time_us);
    if (c.beside_compute) {
      ++beside;
      CHECK(c.time_us >= kBeside - 1e-6);
    } else {
      ++other;
      CHECK(c.time_us < kBeside);
    }
  }
  CAPTURE(beside, other);
  CHECK(beside > 0);
  CHECK(other > 0);
}
