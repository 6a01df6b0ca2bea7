// paralab tests — the calibration's one robust fit (analysis/calibration/lad_fit.hpp): weighted
// least absolute deviations of a fixed cost and a factor.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <stdexcept>

#include "analysis/calibration/lad_fit.hpp"
#include "analysis/stats.hpp"

using namespace paralab::calib;

TEST_CASE("weighted median: the value where half the weight is reached", "[analysis][lad]") {
  CHECK(weighted_median({{1, 1}, {2, 1}, {3, 1}}) == 2);
  CHECK(weighted_median({{1, 1}, {2, 1}, {10, 5}}) == 10);
  CHECK(weighted_median({{5, 1}, {1, 1}}) == 1);  // ties toward the lower value
  CHECK(weighted_median({}) == 0);
}

TEST_CASE("fixed cost and factor come back from noisy samples with outliers", "[analysis][lad]") {
  // y = 12 + 1.3 x over x in 10..1000 us, +-2 % noise, and 10 % of the samples 5x too slow.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> noise(-0.02, 0.02), size(10, 1000);
  std::vector<LadPoint> pts;
  for (int i = 0; i < 400; ++i) {
    const double x = size(rng);
    double y = (12 + 1.3 * x) * (1 + noise(rng));
    if (i % 10 == 0) y *= 5;
    pts.push_back({y, x, 1.0 / y});
  }
  const LadFit f = fit_lad(pts, true);
  CHECK(f.fixed == Approx(12).margin(1.5));
  CHECK(f.factor == Approx(1.3).epsilon(0.02));
  CHECK(f.mape_pct < 45);  // the outliers' 80 % each over a tenth of the samples, and the noise
}

TEST_CASE("one size of op: the factor stays 1 and the fixed cost says it", "[analysis][lad]") {
  std::vector<LadPoint> pts;
  for (int i = 0; i < 30; ++i) pts.push_back({100.0 + (i % 3), 40.0, 1.0 / 100});
  const LadFit f = fit_lad(pts, true);
  CHECK(f.factor == 1.0);
  CHECK(f.fixed == Approx(61.0));
}

TEST_CASE("without a factor: the fixed cost is the weighted median of the residuals", "[analysis][lad]") {
  std::vector<LadPoint> pts = {{5, 1, 1}, {6, 1, 1}, {100, 1, 1}};
  const LadFit f = fit_lad(pts, false);
  CHECK(f.factor == 1.0);
  CHECK(f.fixed == Approx(5.0));
}

TEST_CASE("the fixed cost is held at its floor", "[analysis][lad]") {
  // Faster than modeled: no negative fixed cost, the factor takes it.
  std::vector<LadPoint> pts;
  for (double x = 10; x <= 500; x += 10) pts.push_back({0.5 * x, x, 1.0 / (0.5 * x)});
  const LadFit f = fit_lad(pts, true);
  CHECK(f.fixed == Approx(0.0).margin(1e-6));
  CHECK(f.factor == Approx(0.5).epsilon(1e-6));
}

TEST_CASE("fit_lad rejects bad input", "[analysis][lad]") {
  CHECK_THROWS_AS(fit_lad({{1, 1, -1}}, true), std::invalid_argument);
  CHECK_THROWS_AS(fit_lad({{std::nan(""), 1, 1}}, true), std::invalid_argument);
  CHECK_THROWS_AS(fit_lad({{1, 1, 1}}, true, 0.5), std::invalid_argument);
}
