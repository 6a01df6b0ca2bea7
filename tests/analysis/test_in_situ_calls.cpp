// paralab tests — the in-situ communication classes beyond the per-call cost: contended
// collectives (CollectiveSpec::contended_lat_us) and the calls' tail (call_tail_us), fitted from
// synthetic samples and read back from simulated steps.
#include <catch2/catch.hpp>

#include <algorithm>
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

// Collectives whose last member arrived while another group's poller on the node still spun
// (CommSample::contended_since_us within the spin window) set their own per-call cost once 20
// of them and 20 other collectives were seen awake; the calibrated topology's
// contended_lat_us is what that adds to launch's. With fewer, or with the other call's poller
// past its window (asleep), they are ordinary calls: one weighted median over all.
TEST_CASE("in situ, contended collectives set contended_lat_us", "[analysis][calibrate]") {
  const StepIR base_ir = build_step_ir(test::scenario_from(cpu_scenario("cpu-host")));
  for (const auto& [contended, since] :
       {std::pair{30, 100.0}, std::pair{10, 100.0}, std::pair{30, exec::kPollSpinUs + 1.0}, std::pair{30, -1.0}}) {
    CalibrationResult r = synthetic_result(base_ir);
    const double ar_fit = r.comm_fit.predict_us(CommPattern::all_reduce, 2, 16384);
    for (int i = 0; i < 30; ++i) r.in_situ.comm.push_back({CommPattern::all_reduce, 2, 16384, ar_fit + 40 + i, 1, 0.0, 0.0});
    for (int i = 0; i < contended; ++i) {
      CommSample c{CommPattern::all_reduce, 2, 16384, ar_fit + 100 + 2 * i, 1, 0.0, 0.0};
      c.contended_since_us = since;
      r.in_situ.comm.push_back(c);
    }
    fit_all(r);
    CAPTURE(contended, since);
    REQUIRE(r.have_in_situ_comm());
    const std::string toml = topology_toml(r);
    test::TempFile topo(toml, "calibrated-contended.toml");
    const Topology t = load_topology(topo.path());
    CHECK(r.comm_in_situ_bytes_slowdown == 0.0);  // one size: the per-call costs say it all
    if (contended >= 20 && since >= 0 && since < exec::kPollSpinUs) {
      CHECK(r.contended_extra_own);
      CHECK(r.in_situ_awake_contended == static_cast<size_t>(contended));
      CHECK(r.comm_in_situ_extra_us == Approx(weighted_extra(range_us(40, 30), ar_fit)));
      CHECK(r.contended_in_situ_extra_us == Approx(weighted_extra(range_us(100, contended, 2.0), ar_fit)));
      CHECK(t.collectives.contended_lat_us == Approx(r.contended_in_situ_extra_us - r.comm_in_situ_extra_us).epsilon(1e-5));
      CHECK(t.collectives.contended_lat_us > 40.0);
      CHECK(toml.find("per contended collective (weighted median over 30 executed calls") != std::string::npos);
    } else {
      std::vector<double> all = range_us(40, 30);
      std::vector<std::pair<double, double>> vw;
      for (double e : all) vw.push_back({e, 1.0 / (ar_fit + e)});
      for (double e : range_us(100, contended, 2.0)) vw.push_back({e, 1.0 / (ar_fit + e)});
      CHECK_FALSE(r.contended_extra_own);
      CHECK(r.comm_in_situ_extra_us == Approx(weighted_median(vw)));
      CHECK(t.collectives.contended_lat_us == 0.0);
      CHECK(toml.find("# contended_lat_us: 0 (") != std::string::npos);
    }
  }
}

// The simulator and the in-situ calibration class a collective alike: within its stage, it
// starts while a call of another group kind on the node was posted less than poll_spin_us
// before and has not ended. A ZeRO-3 step (TP 2 x DP 2, the DP all-gathers prefetched beside the
// TP calls) simulated with contended_lat_us reads back, in situ, with every contended call at
// least that long and every other one shorter, and the step is longer than without it.
TEST_CASE("a contended collective pays contended_lat_us, and in situ finds the same calls", "[analysis][calibrate]") {
  const std::string text =
      "[model]\npreset = \"tiny\"\nnum_layers = 4\n[training]\nglobal_batch_size = 8\nmicro_batch_size = 2\n"
      "precision = \"fp32\"\n[parallel]\ntensor = 2\ndata = 2\nsequence_parallel = true\nzero_stage = 3\n"
      "[cluster]\ntopology = \"cpu-host\"\nnodes = 1\ndevices_per_node = 4\n";
  constexpr double kExtra = 400.0;
  double step_us[2] = {0, 0};
  for (int with = 0; with < 2; ++with) {
    Scenario s = test::scenario_from(text);
    s.topology.collectives.poll_spin_us = exec::kPollSpinUs;
    s.topology.collectives.wake_us = 0.0;
    s.topology.collectives.sync_skew_us = 0.0;
    s.topology.collectives.contended_lat_us = with ? kExtra : 0.0;
    const StepIR ir = build_step_ir(s);
    const sim::Simulation sim = sim::simulate(ir);
    step_us[with] = sim.result.step_time_s * 1e6;
    InSituSamples in;
    collect_in_situ(ir, sim.result, "execution test", in);
    size_t contended = 0, other = 0;
    double longest_other = 0;
    for (const CommSample& c : in.comm) {
      if (c.pattern == CommPattern::send_recv) continue;
      if (c.contended_since_us >= 0 && c.contended_since_us < exec::kPollSpinUs) {
        ++contended;
        if (with) CHECK(c.time_us >= kExtra - 1e-6);
      } else {
        ++other;
        longest_other = std::max(longest_other, c.time_us);
      }
    }
    CAPTURE(with, contended, other);
    CHECK(contended > 0);
    CHECK(other > 0);
    CHECK(longest_other < kExtra);
  }
  CHECK(step_us[1] > step_us[0]);
}

// CollectiveSpec::call_tail_us: per execution, its calls' mean time beyond what the simulator
// predicts for each (the fit plus the fitted per-call cost, a weighted median), the median
// over the executions. Calls skewed to the right (one of 30 descheduled for 600 us) leave the
// per-call cost where most calls are and put the rest in the tail.
TEST_CASE("in situ, the calls' mean beyond their predicted time is the call tail", "[analysis][calibrate]") {
  const StepIR base_ir = build_step_ir(test::scenario_from(cpu_scenario("cpu-host")));
  CalibrationResult r = synthetic_result(base_ir);
  const double ar_fit = r.comm_fit.predict_us(CommPattern::all_reduce, 2, 16384);
  std::vector<double> extras = range_us(40, 29);
  extras.push_back(600.0);
  for (int e = 0; e < 3; ++e)
    for (size_t i = 0; i < extras.size(); ++i) {
      // Execution 2's calls run 30 us slower each: the median execution is 1's.
      CommSample c{CommPattern::all_reduce, 2, 16384, ar_fit + extras[i] + (e == 2 ? 30.0 : 0.0), 1, 0.0, 0.0};
      c.rank = 0;
      c.op = static_cast<int64_t>(i);
      c.execution = e;
      r.in_situ.comm.push_back(c);
    }
  fit_all(r);
  REQUIRE(r.have_in_situ_comm());
  double mean = 0;
  for (double x : extras) mean += x / static_cast<double>(extras.size());
  CHECK(r.comm_in_situ_extra_us < 70.0);  // where the calls are, not their mean
  CHECK(r.call_tail_executions == 3);
  CHECK(r.call_tail_us == Approx(mean - r.comm_in_situ_extra_us));
  CHECK(r.call_tail_us > 15.0);
  test::TempFile topo(topology_toml(r), "calibrated-tail.toml");
  CHECK(load_topology(topo.path()).collectives.call_tail_us == Approx(r.call_tail_us).epsilon(1e-5));

  // Samples from no execution (a sweep's) give none.
  CalibrationResult none = synthetic_result(base_ir);
  for (double x : extras) none.in_situ.comm.push_back({CommPattern::all_reduce, 2, 16384, ar_fit + x, 1, 0.0, 0.0});
  fit_all(none);
  CHECK(none.call_tail_executions == 0);
  CHECK(none.call_tail_us == 0.0);
}

// The simulator waits the call tail after a call before what depended on it starts: a step
// simulated with it reads back, in situ, with every compute op that waited for a call starting
// the hand-off plus the tail after that call's end, and the step is longer.
TEST_CASE("a call's dependents start call_tail_us after it", "[analysis][calibrate]") {
  double step_s[2] = {0, 0}, bubble_s[2] = {0, 0}, exposed_s[2] = {0, 0};
  for (int with = 0; with < 2; ++with) {
    Scenario s = test::scenario_from(cpu_scenario("cpu-host"));
    s.topology.device.compute_handoff_us = 3.0;
    s.topology.collectives.sync_skew_us = 0.0;
    s.topology.collectives.call_tail_us = with ? 50.0 : 0.0;
    const StepIR ir = build_step_ir(s);
    const sim::Simulation sim = sim::simulate(ir);
    step_s[with] = sim.result.step_time_s;
    bubble_s[with] = sim.result.breakdown.bubble_s;
    for (double x : sim.result.breakdown.exposed_comm_s) exposed_s[with] += x;
    // Every call that released something carries the tail as its stall (OpTiming::stall_us).
    int stalled = 0;
    for (const OpTiming& t : sim.result.ops) {
      if (t.stall_us == 0.0) continue;
      CHECK(is_comm(ir.graph_for(t.rank).op(t.op).kind));
      CHECK(t.stall_us == Approx(50.0));
      ++stalled;
    }
    CHECK((stalled > 20) == (with == 1));
    InSituSamples in;
    collect_in_situ(ir, sim.result, "execution test", in);
    REQUIRE(in.compute_handoff_us.size() > 20);
    for (double g : in.compute_handoff_us) CHECK(g == Approx(with ? 53.0 : 3.0).margin(1e-6));
  }
  CHECK(step_s[1] > step_s[0]);
  // The tail is the calls' time, as a measured call holds it: the exposed communication grows
  // by it and the bubble does not (the compute stream waits for the call either way).
  CHECK(bubble_s[1] == Approx(bubble_s[0]).epsilon(1e-6));
  CHECK(exposed_s[1] - exposed_s[0] == Approx(step_s[1] - step_s[0]).epsilon(1e-6));
}
