// paralab — shared statistics (semantics in stats.hpp).
#include "analysis/stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace paralab::calib {

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  const double w = pos - static_cast<double>(lo);
  return v[lo] * (1 - w) + v[hi] * w;
}

double upper_median(std::vector<double> v) {
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

double weighted_median(std::vector<std::pair<double, double>> vw) {
  double total = 0;
  for (const auto& [v, w] : vw) total += w;
  if (vw.empty() || total <= 0) return 0.0;
  std::sort(vw.begin(), vw.end());
  double acc = 0;
  for (const auto& [v, w] : vw) {
    acc += w;
    if (acc >= 0.5 * total) return v;
  }
  return vw.back().first;
}

namespace {

// The MAPE (%) of execution a's op durations against ref(d) over the ops every execution has;
// nothing when no op is scored.
template <class Ref>
std::optional<double> mape_of(const RunDurations& durations, int runs, int a, Ref ref) {
  double ape = 0;
  int64_t n = 0;
  for (const auto& [key, d] : durations) {
    if (d.size() != static_cast<size_t>(runs)) continue;
    const std::optional<double> e = scored_ape(d[static_cast<size_t>(a)], ref(d));
    if (!e) continue;
    ape += *e;
    ++n;
  }
  if (n == 0) return std::nullopt;
  return 100.0 * ape / static_cast<double>(n);
}

}  // namespace

double run_to_run_mape_pct(const RunDurations& durations, int runs) {
  double sum = 0;
  int64_t pairs = 0;
  for (int a = 0; a < runs; ++a)
    for (int b = 0; b < runs; ++b) {
      if (a == b) continue;
      const std::optional<double> m = mape_of(durations, runs, a, [&](const std::vector<double>& d) { return d[static_cast<size_t>(b)]; });
      if (!m) continue;
      sum += *m;
      ++pairs;
    }
  return pairs ? sum / static_cast<double>(pairs) : 0.0;
}

double reference_spread_pct(const RunDurations& durations, int runs) {
  if (runs < 2) return 0.0;
  double sum = 0;
  int counted = 0;
  for (int a = 0; a < runs; ++a) {
    const std::optional<double> m = mape_of(durations, runs, a, [](const std::vector<double>& d) { return upper_median(d); });
    if (!m) continue;
    sum += *m;
    ++counted;
  }
  return counted ? sum / counted : 0.0;
}

}  // namespace paralab::calib
