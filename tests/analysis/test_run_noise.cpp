// paralab tests — run-to-run noise of executions (analysis/run_noise.hpp): one run against
// another, and the even runs' per-op medians against the odd runs', in closed form and on
// random durations.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <stdexcept>

#include "analysis/run_noise.hpp"

using namespace paralab;
using namespace paralab::calib;

TEST_CASE("split half: the even runs' per-op medians against the odd runs', both directions", "[analysis][noise]") {
  RunDurations d;
  // Even runs take 10 us, odd runs 20 us: 10/20 one way, 10/10 the other, mean 75 %.
  d[{0, 1}] = {10, 20, 10, 20};
  CHECK(split_half_mape_pct(d, 4) == Approx(75.0));
  // A second op that reproduces exactly halves it; one shorter than kMinScoredUs in both halves
  // is not scored; one missing a run is skipped.
  d[{0, 2}] = {50, 50, 50, 50};
  d[{1, 1}] = {0.5, 0.2, 0.5, 0.2};
  d[{1, 2}] = {50, 50, 50};
  CHECK(split_half_mape_pct(d, 4) == Approx(37.5));
  // The upper median of each half (three even runs: 10, 10, 40 -> 10; two odd: 20, 30 -> 30).
  RunDurations u;
  u[{0, 0}] = {10, 30, 40, 20, 10};
  CHECK(split_half_mape_pct(u, 5) == Approx(100.0 * (20.0 / 30.0 + 20.0 / 10.0) / 2.0));
  // Below four runs a half is one execution: not reported.
  CHECK(split_half_mape_pct(d, 3) == 0.0);
  CHECK(split_half_mape_pct({}, 8) == 0.0);
}

TEST_CASE("split half by launch: the even launches' runs against the odd launches'", "[analysis][noise]") {
  // Three launches of two steps each; each launch keeps its own pace (10, 20, 10 us), so halves
  // split inside the launches agree, halves by launch do not.
  RunDurations d;
  d[{0, 1}] = {10, 10, 20, 20, 10, 10};
  const std::vector<int> launch = {0, 0, 1, 1, 2, 2};
  CHECK(split_half_mape_pct(d, 6) == Approx(0.0));
  CHECK(split_half_mape_pct(d, 6, launch) == Approx(75.0));  // 10/20 and 10/10, as above
  // One launch per run is the runs' own parity.
  RunDurations e;
  e[{0, 1}] = {10, 20, 10, 20};
  CHECK(split_half_mape_pct(e, 4, {0, 1, 2, 3}) == Approx(split_half_mape_pct(e, 4)));
  // Every run in one launch: no halves to compare.
  CHECK(split_half_mape_pct(d, 6, {0, 0, 0, 0, 0, 0}) == 0.0);
  // A launch for each run, or none.
  CHECK_THROWS_AS(split_half_mape_pct(d, 6, {0, 1}), std::invalid_argument);
}

TEST_CASE("run to run: one run against another over ordered pairs", "[analysis][noise]") {
  RunDurations d;
  d[{0, 0}] = {10, 20};  // 10/20 and 10/10
  CHECK(run_to_run_mape_pct(d, 2) == Approx(75.0));
  CHECK(run_to_run_mape_pct(d, 1) == 0.0);
}

TEST_CASE("split half on random durations: identical halves give 0, noise gives about its size", "[analysis][noise]") {
  std::mt19937_64 rng(20261122);
  std::uniform_real_distribution<double> base(5.0, 500.0), jitter(0.9, 1.1);
  RunDurations same, noisy;
  for (OpId op = 0; op < 200; ++op) {
    const double b = base(rng);
    std::vector<double> s, n;
    for (int r = 0; r < 10; ++r) {
      // Runs 2k and 2k+1 equal: the halves hold the same values.
      s.push_back(b * (1.0 + 0.01 * static_cast<double>(r / 2)));
      n.push_back(b * jitter(rng));
    }
    same[{0, op}] = s;
    noisy[{0, op}] = n;
  }
  CHECK(split_half_mape_pct(same, 10) == Approx(0.0).margin(1e-12));
  // Medians of 5 draws of +-10 % uniform noise differ by a few percent, less than single runs do.
  const double half = split_half_mape_pct(noisy, 10), one = run_to_run_mape_pct(noisy, 10);
  CHECK(half > 0.5);
  CHECK(half < one);
  CHECK(one < 10.0);
}

TEST_CASE("the fastest half: the ceil(n/2) shortest steps, fastest first, and their lower middle", "[analysis][noise]") {
  CHECK(fastest_half({5, 3, 4, 1}) == std::vector<int>{3, 1});
  CHECK(fast_half_step_s({5, 3, 4, 1}) == 1.0);
  CHECK(fastest_half({5, 3, 4, 1, 2}) == std::vector<int>{3, 4, 1});
  CHECK(fast_half_step_s({5, 3, 4, 1, 2}) == 2.0);
  CHECK(fastest_half({2, 2, 1}) == std::vector<int>{2, 0});  // ties: the earlier run
  CHECK(fastest_half({7}) == std::vector<int>{0});
  CHECK(fast_half_step_s({7}) == 7.0);
  CHECK(fastest_half({}).empty());
  CHECK(fast_half_step_s({}) == 0.0);
  // Random steps: the half holds the ceil(n/2) smallest, none of the others is smaller.
  std::mt19937 rng(31);
  std::uniform_real_distribution<double> step(0.01, 0.05);
  for (int n = 1; n <= 15; ++n) {
    std::vector<double> s(static_cast<size_t>(n));
    for (double& x : s) x = step(rng);
    const std::vector<int> half = fastest_half(s);
    REQUIRE(half.size() == static_cast<size_t>((n + 1) / 2));
    double worst = 0;
    for (int k : half) worst = std::max(worst, s[static_cast<size_t>(k)]);
    int below = 0;
    for (double x : s) below += x <= worst;
    CHECK(below == static_cast<int>(half.size()));
    std::vector<double> sorted = s;
    std::sort(sorted.begin(), sorted.end());
    CHECK(fast_half_step_s(s) == sorted[(half.size() - 1) / 2]);
  }
}

TEST_CASE("the centred fast half: the fastest runs whose middle one is the fast half's median", "[analysis][noise]") {
  // 4 executions (quickstart's calibration): the half is 2, its median the fastest, alone.
  CHECK(centred_fast_half({12.4, 10.9, 13.3, 11.6}) == std::vector<int>{1});
  CHECK(centred_fast_half({5, 3, 4, 1, 2}) == std::vector<int>{3, 4, 1});  // odd half: whole
  CHECK(centred_fast_half({7, 1, 6, 2, 5, 3, 4}) == std::vector<int>{1, 3, 5});  // 7 runs: half 4, less its slowest
  CHECK(centred_fast_half({7}) == std::vector<int>{0});
  CHECK(centred_fast_half({}).empty());
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> step(0.01, 0.05);
  for (int n = 1; n <= 40; ++n) {
    std::vector<double> s(static_cast<size_t>(n));
    for (double& x : s) x = step(rng);
    const std::vector<int> c = centred_fast_half(s), half = fastest_half(s);
    REQUIRE(c.size() % 2 == 1);
    CHECK(c.size() + (half.size() % 2 == 0 ? 1 : 0) == half.size());
    CHECK(std::equal(c.begin(), c.end(), half.begin()));
    CHECK(s[static_cast<size_t>(c[c.size() / 2])] == fast_half_step_s(s));
  }
}
