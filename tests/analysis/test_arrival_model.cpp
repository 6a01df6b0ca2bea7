// paralab tests — the calibration's arrival model (analysis/arrival_model.hpp): the drift or
// the constant skew, whichever predicts the calibration's own executions of its scenario
// better, on a synthetic calibration whose arrivals the drift tells.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "analysis/arrival_model.hpp"
#include "analysis/calibrate.hpp"
#include "analysis/in_situ.hpp"
#include "exec/comm.hpp"
#include "ir/step_ir.hpp"
#include "ir/topology_loader.hpp"
#include "results/step_result.hpp"
#include "sim/simulate.hpp"
#include "../ir/test_util.hpp"
#include "calibrate_test_util.hpp"

using namespace paralab;
using namespace paralab::calib;
using namespace paralab::calib::testing;

namespace {

// The scenario simulated on `r`'s calibrated topology (s).
double predicted_step_s(const Scenario& s, const CalibrationResult& r) {
  Scenario on = s;
  on.topology = calibrated_topology(r);
  return sim::simulate(build_step_ir(on)).result.step_time_s;
}

// A calibration of `s` whose arrivals' waits grow with the time since compute last waited, and
// whose spreads (twice the wait) put the members beyond the median time asleep: fit_all uses
// the drift (the in-situ test of test_in_situ_samples.cpp). No executions of the scenario yet.
CalibrationResult drifting(const Scenario& s) {
  Scenario simulated = s;
  simulated.topology.collectives.sync_skew_us = 0.0;
  simulated.topology.collectives.sync_drift = 0.25;  // arrivals with times since compute waited
  const StepIR ir = build_step_ir(simulated);
  const sim::Simulation sim = sim::simulate(ir);
  CalibrationResult r = synthetic_result(build_step_ir(s));
  collect_in_situ(ir, sim.result, "execution test", r.in_situ);
  collect_in_situ(ir, sim.result, "execution test", r.in_situ);  // a second execution
  std::vector<double> since;
  for (const Arrival& a : r.in_situ.arrivals) since.push_back(a.since_us);
  std::sort(since.begin(), since.end());
  const double rate = 0.25 * exec::kPollSpinUs / since[since.size() / 2];
  for (Arrival& a : r.in_situ.arrivals) {
    a.wait_us = rate * a.since_us;
    a.spread_us = 2 * a.wait_us;
    a.time_us = 100;
  }
  fit_all(r);
  return r;
}

// Eight executions of `s`, every one `step_s` long.
void executed_at(CalibrationResult& r, const Scenario& s, double step_s) {
  auto& steps = r.in_situ.step_s[s.name];
  steps.digest = scenario_digest(s);
  steps.s.assign(8, step_s);
}

}  // namespace

TEST_CASE("calibrate keeps the drift or the constant skew, whichever predicts its own executions", "[analysis][calibrate]") {
  const Scenario s = test::scenario_from(cpu_scenario("cpu-host"));
  const CalibrationResult fitted = drifting(s);
  REQUIRE(fitted.drift_used());
  REQUIRE(fitted.sync_skew_us == 0.0);
  CalibrationResult constant = fitted;
  constant.drift_allowed = false;
  fit_all(constant);
  CHECK_FALSE(constant.drift_used());
  CHECK(constant.sync_drift() == 0.0);
  CHECK(constant.spread_drift() == 0.0);
  REQUIRE(constant.sync_skew_us > 0.0);  // the median execution's mean wait
  const double with_drift = predicted_step_s(s, fitted), with_constant = predicted_step_s(s, constant);
  CAPTURE(with_drift, with_constant);
  REQUIRE(std::abs(with_drift / with_constant - 1.0) > 0.005);  // the choice moves the step

  SECTION("executions the constant predicts: the drift is dropped, and the file says why") {
    CalibrationResult r = fitted;
    executed_at(r, s, with_constant);
    choose_arrival_model(r, {s});
    CHECK_FALSE(r.drift_allowed);
    CHECK_FALSE(r.drift_used());
    CHECK(r.sync_skew_us == Approx(constant.sync_skew_us));
    CHECK(r.in_sample_skew_pct == Approx(0.0).margin(1e-6));
    CHECK(r.in_sample_drift_pct == Approx(100.0 * std::abs(with_drift / with_constant - 1.0)));
    CHECK(mean_in_sample_pct(r, {s}) == Approx(0.0).margin(1e-6));
    const std::string toml = topology_toml(r);
    CHECK(toml.find("not used: its spread below") != std::string::npos);
    CHECK(toml.find("with a constant skew") != std::string::npos);
    test::TempFile file(toml, "calibrated-constant.toml");
    const Topology t = load_topology(file.path());
    CHECK(t.collectives.sync_drift == 0.0);
    CHECK(t.collectives.spread_drift == 0.0);
    CHECK(t.collectives.sync_skew_us == Approx(constant.sync_skew_us).epsilon(1e-5));
  }
  SECTION("executions the drift predicts: it stays, the comparison recorded") {
    CalibrationResult r = fitted;
    executed_at(r, s, with_drift);
    choose_arrival_model(r, {s});
    CHECK(r.drift_used());
    CHECK(r.sync_skew_us == 0.0);
    CHECK(r.sync_drift() == Approx(fitted.sync_drift()));
    CHECK(r.in_sample_drift_pct == Approx(0.0).margin(1e-6));
    CHECK(r.in_sample_skew_pct == Approx(100.0 * std::abs(with_constant / with_drift - 1.0)));
    const std::string toml = topology_toml(r);
    CHECK(toml.find("used: its spread below") != std::string::npos);
    CHECK(toml.find("not used: its spread below") == std::string::npos);
  }
  SECTION("no executions of the scenario: nothing to hold either to, the drift stays") {
    CalibrationResult r = fitted;
    choose_arrival_model(r, {s});
    CHECK(r.drift_used());
    CHECK(std::isnan(r.in_sample_drift_pct));
    CHECK(std::isnan(r.in_sample_skew_pct));
    CHECK(std::isnan(mean_in_sample_pct(r, {s})));
  }
  SECTION("without the drift in the first place there is nothing to choose") {
    CalibrationResult r = synthetic_result(build_step_ir(s));
    REQUIRE_FALSE(r.drift_used());
    executed_at(r, s, with_drift);
    choose_arrival_model(r, {s});
    CHECK(r.drift_allowed);
    CHECK(std::isnan(r.in_sample_drift_pct));
    CHECK(mean_in_sample_pct(r, {s}) > 0.0);  // the executions are there: it was not compared
  }
}
