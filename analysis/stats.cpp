// paralab — run-to-run noise of executions (semantics in run_noise.hpp).
#include "analysis/run_noise.hpp"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>

#include "analysis/compare.hpp"

namespace paralab::calib {

double upper_median(std::vector<double> v) {
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

std::vector<int> fastest_half(const std::vector<double>& step_s) {
  std::vector<int> order(step_s.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return step_s[static_cast<size_t>(a)] < step_s[static_cast<size_t>(b)]; });
  order.resize((order.size() + 1) / 2);
  return order;
}

double fast_half_step_s(const std::vector<double>& step_s) {
  const std::vector<int> fast = fastest_half(step_s);
  return fast.empty() ? 0.0 : step_s[static_cast<size_t>(fast[(fast.size() - 1) / 2])];
}

std::vector<int> centred_fast_half(const std::vector<double>& step_s) {
  std::vector<int> fast = fastest_half(step_s);
  if (!fast.empty()) fast.resize(2 * ((fast.size() - 1) / 2) + 1);
  return fast;
}

double run_to_run_mape_pct(const RunDurations& durations, int runs) {
  double sum = 0;
  int64_t pairs = 0;
  for (int a = 0; a < runs; ++a)
    for (int b = 0; b < runs; ++b) {
      if (a == b) continue;
      double ape = 0;
      int64_t n = 0;
      for (const auto& [key, d] : durations) {
        if (d.size() != static_cast<size_t>(runs)) continue;
        const std::optional<double> e = scored_ape(d[static_cast<size_t>(a)], d[static_cast<size_t>(b)]);
        if (!e) continue;
        ape += *e;
        ++n;
      }
      if (n == 0) continue;
      sum += 100.0 * ape / static_cast<double>(n);
      ++pairs;
    }
  return pairs ? sum / static_cast<double>(pairs) : 0.0;
}

// Measured by hand on the twelfth session's executions (random 7/8 splits of 15 runs, median
// of 20 splits; bench/results/validate_cpu.md): 1-4 % for 1-2 ranks, 20-54 % for 4 ranks
// sharing 2 cores. The even/odd split makes the figure deterministic for given runs.
double split_half_mape_pct(const RunDurations& durations, int runs, const std::vector<int>& launch_of) {
  if (runs < kMinSplitRuns) return 0.0;
  const bool by_launch = !launch_of.empty();
  if (by_launch && launch_of.size() != static_cast<size_t>(runs))
    throw std::invalid_argument("split_half_mape_pct: " + std::to_string(launch_of.size()) + " launches given for " +
                                std::to_string(runs) + " runs");
  // Which half each run is in: its launch's parity, else its own.
  std::vector<int> half(static_cast<size_t>(runs));
  for (size_t r = 0; r < half.size(); ++r) half[r] = (by_launch ? launch_of[r] : static_cast<int>(r)) % 2;
  if (std::count(half.begin(), half.end(), 1) == 0) return 0.0;  // one launch: no halves to compare
  double ape_ab = 0, ape_ba = 0;
  int64_t n = 0;
  for (const auto& [key, d] : durations) {
    if (d.size() != static_cast<size_t>(runs)) continue;
    std::vector<double> even, odd;
    for (size_t r = 0; r < d.size(); ++r) (half[r] ? odd : even).push_back(d[r]);
    const double a = upper_median(even), b = upper_median(odd);
    const std::optional<double> ab = scored_ape(a, b), ba = scored_ape(b, a);
    if (!ab || !ba) continue;
    ape_ab += *ab;
    ape_ba += *ba;
    ++n;
  }
  return n ? 100.0 * (ape_ab + ape_ba) / (2.0 * static_cast<double>(n)) : 0.0;
}

}  // namespace paralab::calib
