// paralab tests — the weighted least-absolute-deviations split (lad_fit.hpp): weighted medians,
// per-class offsets and one shared slope recovered from synthetic calls with outliers.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <stdexcept>

#include "analysis/lad_fit.hpp"

using namespace paralab::calib;

TEST_CASE("weighted median: the value where half the weight is reached", "[analysis][lad]") {
  CHECK(weighted_median({}) == 0.0);
  CHECK(weighted_median({{5.0, 0.0}}) == 0.0);  // no weight at all
  CHECK(weighted_median({{3.0, 1}, {1.0, 1}, {2.0, 1}}) == 2.0);
  // A heavy small value pulls it down: weights 1/value as the calibration uses.
  CHECK(weighted_median({{10.0, 0.1}, {20.0, 0.05}, {30.0, 1.0 / 30}, {2.0, 0.5}}) == 2.0);
  CHECK(weighted_median({{1.0, 1}, {2.0, 1}, {3.0, 1}, {4.0, 1}}) == 2.0);  // tie: the lower
}

TEST_CASE("offsets per class and a shared slope come back from noisy calls with outliers", "[analysis][lad]") {
  // Class 0 (collectives): y = 30 + 1.5 x; class 1 (transfers): y = 4 + 1.5 x; x = the sweep's
  // bytes part of a call (us), over three decades; +-10 % noise; 15 % of the calls far late
  // (a descheduled rank), which a least-squares fit would follow and a median does not.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<LadPoint> pts;
  for (int i = 0; i < 3000; ++i) {
    const size_t cls = i % 3 == 0 ? 1 : 0;
    const double x = std::pow(10.0, 3.0 * u(rng));  // 1 us .. 1 ms
    double y = (cls == 0 ? 30.0 : 4.0) + 1.5 * x;
    y *= 1.0 + 0.1 * (2 * u(rng) - 1);
    if (u(rng) < 0.15) y += 2000 * u(rng);
    pts.push_back({y, x, 1.0 / y, cls});
  }
  const OffsetSlopeFit f = fit_offsets_slope(pts, 2, 20.0);
  REQUIRE(f.offset.size() == 2);
  CHECK(f.slope == Approx(1.5).epsilon(0.05));
  CHECK(f.offset[0] == Approx(30.0).epsilon(0.15));
  CHECK(f.offset[1] == Approx(4.0).epsilon(0.25));
  CHECK(f.loss < f.loss_flat);
  // The slope is bounded: the same data with max_slope 0.5 stops there.
  CHECK(fit_offsets_slope(pts, 2, 0.5).slope == Approx(0.5).epsilon(1e-6));
}

TEST_CASE("one size of call: the offsets alone say it, the slope stays 0", "[analysis][lad]") {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<LadPoint> pts;
  for (int i = 0; i < 500; ++i) {
    const double y = 12.0 + 40.0 * u(rng);
    pts.push_back({y, 8.0, 1.0 / y, 0});
  }
  const OffsetSlopeFit f = fit_offsets_slope(pts, 1, 20.0);
  CHECK(f.slope == 0.0);
  CHECK(f.loss == Approx(f.loss_flat));
  CHECK(f.offset[0] > 12.0);
  CHECK(f.offset[0] < 52.0);
}

TEST_CASE("calls faster than the slope-free model keep the slope at 0", "[analysis][lad]") {
  // y falls with x: a negative slope would fit, and the fit allows none (an in-situ call does
  // not move its bytes faster than the sweep's warm buffers).
  std::vector<LadPoint> pts;
  for (int i = 1; i <= 50; ++i) pts.push_back({100.0 - i, static_cast<double>(i), 1.0, 0});
  const OffsetSlopeFit f = fit_offsets_slope(pts, 1, 20.0);
  CHECK(f.slope == 0.0);
}

TEST_CASE("offsets held at a floor: the slope fits what the floor leaves", "[analysis][lad]") {
  // y = -10 + 2 x exactly: unconstrained, offset -10 and slope 2; with offsets >= 0 the best
  // is offset 0 and a slope that splits the miss (below 2: small x over-, large x under-predicted).
  std::vector<LadPoint> pts;
  for (int i = 10; i <= 100; i += 10) pts.push_back({-10.0 + 2.0 * i, static_cast<double>(i), 1.0, 0});
  const OffsetSlopeFit free = fit_offsets_slope(pts, 1, 20.0);
  CHECK(free.slope == Approx(2.0).epsilon(1e-6));
  CHECK(free.offset[0] == Approx(-10.0).epsilon(1e-5));
  CHECK(free.loss == Approx(0.0).margin(1e-5));
  const OffsetSlopeFit held = fit_offsets_slope(pts, 1, 20.0, 0.0);
  CHECK(held.offset[0] == 0.0);
  CHECK(held.slope < 2.0);
  CHECK(held.slope > 1.7);
  CHECK(held.loss > 0.0);
  CHECK_THROWS_AS(fit_offsets_slope(pts, 1, 20.0, NAN), std::invalid_argument);
}

TEST_CASE("fit_offsets_slope rejects bad input", "[analysis][lad]") {
  CHECK_THROWS_AS(fit_offsets_slope({}, 0, 1.0), std::invalid_argument);
  CHECK_THROWS_AS(fit_offsets_slope({{1, 1, 1, 2}}, 2, 1.0), std::invalid_argument);
  CHECK_THROWS_AS(fit_offsets_slope({{1, 1, -1, 0}}, 1, 1.0), std::invalid_argument);
  CHECK_THROWS_AS(fit_offsets_slope({{NAN, 1, 1, 0}}, 1, 1.0), std::invalid_argument);
  CHECK_THROWS_AS(fit_offsets_slope({{1, 1, 1, 0}}, 1, -1.0), std::invalid_argument);
  // No points: offsets 0, slope 0.
  const OffsetSlopeFit f = fit_offsets_slope({}, 2, 5.0);
  CHECK(f.offset == std::vector<double>{0.0, 0.0});
  CHECK(f.slope == 0.0);
}
