// paralab tests — a calibration held to its own executions of a scenario
// (analysis/in_sample.hpp): the scenario simulated on a calibrated topology against its
// [[calibration.execution]] of the same digest (none for another scenario's); the warning beyond
// kInSampleBoundPct either way, naming both steps and the executions' range, and none within it;
// and when validate makes its calibration again.
#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "analysis/in_sample.hpp"
#include "results/step_result.hpp"
#include "sim/simulate.hpp"
#include "calibrate_test_util.hpp"

using namespace paralab;
using namespace paralab::calib;
using namespace paralab::calib::testing;

namespace {

// N11's cpu-tp2 calibration (bench/results/validate_cpu.md, "forty-fourth session").
InSample n11_cpu_tp2(double predicted_step_s) {
  return {{"cpu-tp2", "af765c8ba317759d", 96, 4, 0.0320269, 0.0188953, 0.0464212, 0.0243629}, predicted_step_s};
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("in sample: the scenario simulated on its calibration, against that calibration's executions of it", "[analysis][in-sample]") {
  const Scenario plain = test::scenario_from(cpu_scenario("cpu-host"));
  CalibrationResult r = synthetic_result(build_step_ir(plain));
  // The calibration executed this scenario (its digest) at 12-30 ms a step, fastest half's median 14 ms.
  r.in_situ.step_s[plain.name] = {scenario_digest(plain), {0.030, 0.012, 0.014, 0.016, 0.020, 0.013}};
  test::TempFile topo(topology_toml(r), "calibrated.toml");
  const Scenario calibrated = test::scenario_from(cpu_scenario(topo.path().string()));

  const ExecutionPoint* own = own_executions(calibrated);
  REQUIRE(own != nullptr);
  CHECK(own->executions == 6);
  CHECK(own->step_fast_s == Approx(0.013));  // the fastest 3: 12, 13, 14 ms, their lower middle
  const std::optional<InSample> s = in_sample(calibrated);
  REQUIRE(s);
  const double simulated = sim::simulate(build_step_ir(calibrated)).result.step_time_s;
  CHECK(s->predicted_step_s == simulated);
  CHECK(s->pct() == Approx(100.0 * (simulated / 0.013 - 1.0)));
  // At odds exactly beyond the bound asked for, either side of its own distance.
  CHECK(s->at_odds(std::abs(s->pct()) * 0.99));
  CHECK_FALSE(s->at_odds(std::abs(s->pct()) * 1.01));

  // Executions of another scenario (another digest) say nothing of this one.
  CalibrationResult other = synthetic_result(build_step_ir(plain));
  other.in_situ.step_s["cpu-other"] = {"0123456789abcdef", {0.010, 0.011}};
  test::TempFile topo2(topology_toml(other), "calibrated-other.toml");
  const Scenario on_other = test::scenario_from(cpu_scenario(topo2.path().string()));
  CHECK(own_executions(on_other) == nullptr);
  CHECK_FALSE(in_sample(on_other));
}

TEST_CASE("in sample: a prediction beyond 10 % from the calibration's own executions is warned of", "[analysis][in-sample]") {
  const InSample s = n11_cpu_tp2(0.02189);  // N11's prediction: -10.2 %
  CHECK(s.at_odds());
  const std::string w = in_sample_warning(s);
  CHECK(has(w, "warning: the prediction (0.02189 s per step) is -10.2% from the calibration's own executions"));
  CHECK(has(w, "(0.02436 s, their fastest half's median; 96 executions, 0.0189 .. 0.04642 s, median 0.03203 s)"));
  CHECK(has(w, "beyond 10%"));
  CHECK(has(w, "--recalibrate, or a new --calibration file"));
  // Either way: a prediction above its executions too.
  CHECK(has(in_sample_warning(n11_cpu_tp2(0.0243629 * 1.15)), "is +15.0% from"));
}

TEST_CASE("in sample: no warning within the bound, nor without executions to hold it to", "[analysis][in-sample]") {
  const double fast = 0.0243629;
  const double edge = (kInSampleBoundPct - 1e-6) / 100;
  CHECK(in_sample_warning(n11_cpu_tp2(fast * (1 + edge))).empty());
  CHECK(in_sample_warning(n11_cpu_tp2(fast * (1 - edge))).empty());
  std::mt19937_64 rng(44);
  std::uniform_real_distribution<double> within(-0.0999, 0.0999), beyond(0.1001, 0.9);
  for (int i = 0; i < 200; ++i) {
    CHECK(in_sample_warning(n11_cpu_tp2(fast * (1 + within(rng)))).empty());
    const double off = beyond(rng);
    CHECK_FALSE(in_sample_warning(n11_cpu_tp2(fast * (1 + off))).empty());
    CHECK_FALSE(in_sample_warning(n11_cpu_tp2(fast * (1 - off))).empty());
  }
  // Executions without a step (nothing measured): not at odds.
  InSample empty = n11_cpu_tp2(1.0);
  empty.executions.step_fast_s = 0;
  CHECK_FALSE(empty.at_odds());
  CHECK(in_sample_warning(empty).empty());
}

TEST_CASE("in sample: validate calibrates again while the best so far is at odds, up to its attempts", "[analysis][in-sample]") {
  const std::optional<InSample> odd = n11_cpu_tp2(0.02189), fine = n11_cpu_tp2(0.0240);
  CHECK(calibrate_again(odd, 1, 2));
  CHECK_FALSE(calibrate_again(odd, 2, 2));  // attempts used up
  CHECK_FALSE(calibrate_again(odd, 1, 1));  // --calibration-attempts 1: once
  CHECK(calibrate_again(odd, 2, 3));
  CHECK_FALSE(calibrate_again(fine, 1, 2));  // within the bound
  CHECK_FALSE(calibrate_again(std::nullopt, 1, 2));  // it executed nothing to hold it to
  // Another bound (--in-sample-bound): -1.5 % is at odds beyond 1 %, -10.2 % not beyond 15 %.
  CHECK(calibrate_again(fine, 1, 2, 1.0));
  CHECK_FALSE(calibrate_again(odd, 1, 2, 15.0));
  CHECK(has(in_sample_warning(*fine, 1.0), "beyond 1%"));
  CHECK(in_sample_warning(*odd, 15.0).empty());
}
