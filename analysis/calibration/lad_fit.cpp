// paralab — weighted least absolute deviations of a fixed cost and a factor (lad_fit.hpp).
#include "analysis/calibration/lad_fit.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "analysis/stats.hpp"

namespace paralab::calib {

namespace {

// The best fixed cost and the loss at `factor`.
LadFit at_factor(const std::vector<LadPoint>& pts, double factor, double min_fixed) {
  std::vector<std::pair<double, double>> vw;
  vw.reserve(pts.size());
  for (const LadPoint& p : pts) vw.emplace_back(p.y - factor * p.x, p.w);
  LadFit f;
  f.factor = factor;
  f.fixed = std::max(min_fixed, weighted_median(std::move(vw)));
  for (const LadPoint& p : pts) f.loss += p.w * std::fabs(p.y - f.fixed - factor * p.x);
  return f;
}

}  // namespace

LadFit fit_lad(const std::vector<LadPoint>& pts, bool with_factor, double max_factor, double min_fixed) {
  if (!(max_factor >= 1) || !std::isfinite(max_factor))
    throw std::invalid_argument("fit_lad: max_factor = " + std::to_string(max_factor) + " (allowed: a finite value >= 1)");
  for (const LadPoint& p : pts)
    if (!std::isfinite(p.y) || !std::isfinite(p.x) || !std::isfinite(p.w) || p.w < 0)
      throw std::invalid_argument("fit_lad: a point with a non-finite value or a negative weight");
  LadFit best = at_factor(pts, 1.0, min_fixed);
  if (with_factor && !pts.empty()) {
    // Golden-section search on [0, max_factor] (Kiefer 1953); 80 iterations shrink the bracket
    // by 0.618^80 ~ 2e-17 of its width, below a double's resolution of it.
    constexpr double kInvPhi = 0.6180339887498949;
    double lo = 0, hi = max_factor;
    double x1 = hi - kInvPhi * (hi - lo), x2 = lo + kInvPhi * (hi - lo);
    LadFit f1 = at_factor(pts, x1, min_fixed), f2 = at_factor(pts, x2, min_fixed);
    for (int it = 0; it < 80 && hi - lo > 1e-9 * max_factor; ++it) {
      if (f1.loss <= f2.loss) {
        hi = x2;
        x2 = x1;
        f2 = f1;
        x1 = hi - kInvPhi * (hi - lo);
        f1 = at_factor(pts, x1, min_fixed);
      } else {
        lo = x1;
        x1 = x2;
        f1 = f2;
        x2 = lo + kInvPhi * (hi - lo);
        f2 = at_factor(pts, x2, min_fixed);
      }
    }
    // Kept only where it lowers the loss beyond rounding of the residuals (a millionth of the
    // weighted magnitude): where the data cannot tell factors apart the model's own stays.
    double scale = 0;
    for (const LadPoint& p : pts) scale += p.w * std::fabs(p.y);
    const LadFit& found = f1.loss <= f2.loss ? f1 : f2;
    if (found.loss < best.loss - 1e-6 * scale) best = found;
  }
  double ape = 0;
  size_t n = 0;
  for (const LadPoint& p : pts)
    if (p.y > 0) {
      ape += std::fabs(p.y - best.fixed - best.factor * p.x) / p.y;
      ++n;
    }
  best.mape_pct = n ? 100.0 * ape / static_cast<double>(n) : 0.0;
  return best;
}

}  // namespace paralab::calib
