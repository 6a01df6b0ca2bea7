// paralab tests — validate's warning for a prediction that misses the calibration's own
// executions of the scenario (analysis/validate.hpp, in_sample_warning): said beyond
// kInSampleWarnPct either way, naming both steps and the executions' range; not within it, nor
// when the calibration did not execute the scenario.
#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "analysis/validate.hpp"

using namespace paralab;
using namespace paralab::calib;

namespace {

// N11's cpu-tp2 calibration (bench/results/validate_cpu.md, "forty-fourth session").
ValidateOutcome::HostDrift n11_cpu_tp2() {
  ValidateOutcome::HostDrift h;
  h.executions = 96;
  h.launches = 4;
  h.calibrated_step_s = 0.0243629;
  h.calibrated_median_s = 0.0320269;
  h.calibrated_min_s = 0.0188953;
  h.calibrated_max_s = 0.0464212;
  return h;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("in-sample warning: a prediction beyond 10 % from the calibration's own executions", "[analysis][validate]") {
  const ValidateOutcome::HostDrift h = n11_cpu_tp2();
  const std::string w = in_sample_warning(h, 0.02189);  // N11's prediction: -10.2 %
  CHECK(has(w, "warning: the prediction (0.02189 s per step) is -10.2% from the calibration's own executions"));
  CHECK(has(w, "(0.02436 s, their fastest half's median; 96 executions, 0.0189 .. 0.04642 s, median 0.03203 s)"));
  CHECK(has(w, "beyond 10%"));
  CHECK(has(w, "--recalibrate"));
  // Either way: a prediction above its executions too.
  CHECK(has(in_sample_warning(h, 0.0243629 * 1.15), "is +15.0% from"));
}

TEST_CASE("in-sample warning: none within the bound, nor without the calibration's executions", "[analysis][validate]") {
  ValidateOutcome::HostDrift h = n11_cpu_tp2();
  // Just inside the bound, both ways, and on random predictions within it.
  const double edge = (ValidateOutcome::kInSampleWarnPct - 1e-6) / 100;
  CHECK(in_sample_warning(h, h.calibrated_step_s * (1 + edge)).empty());
  CHECK(in_sample_warning(h, h.calibrated_step_s * (1 - edge)).empty());
  std::mt19937_64 rng(44);
  std::uniform_real_distribution<double> within(-0.0999, 0.0999), beyond(0.1001, 0.9);
  for (int i = 0; i < 200; ++i) {
    const double step = h.calibrated_step_s * (1 + within(rng));
    CHECK(in_sample_warning(h, step).empty());
    const double off = beyond(rng);
    CHECK_FALSE(in_sample_warning(h, h.calibrated_step_s * (1 + off)).empty());
    CHECK_FALSE(in_sample_warning(h, h.calibrated_step_s * (1 - off)).empty());
  }
  // The calibration did not execute this scenario: nothing to hold the prediction to.
  h.executions = 0;
  CHECK(in_sample_warning(h, 1.0).empty());
  CHECK(in_sample_warning(ValidateOutcome::HostDrift{}, 1.0).empty());
}
