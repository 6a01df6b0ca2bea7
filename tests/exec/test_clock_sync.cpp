// tests/exec — Cristian's clock-offset estimate (exec/clock_sync.hpp) on synthetic ping-pongs.
#include <catch2/catch.hpp>

#include <random>

#include "exec/clock_sync.hpp"
#include "ir/error.hpp"

using namespace paralab;
using namespace paralab::exec;

TEST_CASE("clock sync: the shortest round trip sets the offset, and the truth is within its bound") {
  // A peer clock ahead of rank 0's by `truth` us; messages take random, asymmetric times.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> there(2.0, 900.0), back(2.0, 900.0);
  for (double truth : {-4321.5, 0.0, 87.25, 15000.0}) {
    std::vector<ClockSample> s;
    double t = 100.0, best_rtt = 1e300;
    for (int k = 0; k < kClockSyncRounds; ++k) {
      const double d1 = there(rng), d2 = back(rng);
      s.push_back({t, t + d1 + truth, t + d1 + d2});
      best_rtt = std::min(best_rtt, d1 + d2);
      t += d1 + d2 + 10.0;
    }
    const ClockOffset o = cristian_offset(s);
    CAPTURE(truth, o.offset_us, o.error_us);
    CHECK(o.error_us == Approx(best_rtt / 2));
    CHECK(std::abs(o.offset_us - truth) <= o.error_us + 1e-9);
  }
}

TEST_CASE("clock sync: a symmetric round trip gives the exact offset") {
  const ClockOffset o = cristian_offset({{10.0, 500.0 + 25.0, 60.0}, {100.0, 640.0, 180.0}});
  CHECK(o.offset_us == Approx(490.0));  // the first sample: 50 us round trip, midpoint 35
  CHECK(o.error_us == Approx(25.0));
}

TEST_CASE("clock sync: no samples or a round trip ending before it starts are internal errors") {
  CHECK_THROWS_AS(cristian_offset({}), InternalError);
  CHECK_THROWS_AS(cristian_offset({{10.0, 5.0, 9.0}}), InternalError);
}
