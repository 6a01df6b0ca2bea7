// paralab — weighted least absolute deviations, offsets per class and one shared slope
// (lad_fit.hpp).
#include "analysis/lad_fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace paralab::calib {

double weighted_median(std::vector<std::pair<double, double>> value_weight) {
  double total = 0;
  for (const auto& [v, w] : value_weight) total += w;
  if (value_weight.empty() || total <= 0) return 0;
  std::sort(value_weight.begin(), value_weight.end());
  double acc = 0;
  for (const auto& [v, w] : value_weight) {
    acc += w;
    if (acc >= 0.5 * total) return v;
  }
  return value_weight.back().first;  // rounding: the cumulative sum fell short of half
}

namespace {

// The offsets and the loss at slope c.
OffsetSlopeFit at_slope(const std::vector<LadPoint>& pts, size_t classes, double c, double min_offset) {
  std::vector<std::vector<std::pair<double, double>>> by_class(classes);
  for (const LadPoint& p : pts) by_class[p.cls].push_back({p.y - c * p.x, p.w});
  OffsetSlopeFit f;
  f.slope = c;
  f.offset.resize(classes, 0.0);
  for (size_t k = 0; k < classes; ++k)
    f.offset[k] = by_class[k].empty() ? std::max(0.0, min_offset) : std::max(min_offset, weighted_median(std::move(by_class[k])));
  for (const LadPoint& p : pts) f.loss += p.w * std::fabs(p.y - f.offset[p.cls] - c * p.x);
  return f;
}

}  // namespace

OffsetSlopeFit fit_offsets_slope(const std::vector<LadPoint>& pts, size_t classes, double max_slope, double min_offset) {
  if (classes == 0) throw std::invalid_argument("fit_offsets_slope: no classes");
  if (!(max_slope >= 0) || !std::isfinite(max_slope))
    throw std::invalid_argument("fit_offsets_slope: max_slope = " + std::to_string(max_slope) + " (allowed: a finite value >= 0)");
  if (std::isnan(min_offset) || min_offset == std::numeric_limits<double>::infinity())
    throw std::invalid_argument("fit_offsets_slope: min_offset = " + std::to_string(min_offset) + " (allowed: a number or -infinity)");
  for (const LadPoint& p : pts) {
    if (p.cls >= classes)
      throw std::invalid_argument("fit_offsets_slope: class " + std::to_string(p.cls) + " of " + std::to_string(classes));
    if (!std::isfinite(p.y) || !std::isfinite(p.x) || !std::isfinite(p.w) || p.w < 0)
      throw std::invalid_argument("fit_offsets_slope: a point with a non-finite value or a negative weight");
  }
  const OffsetSlopeFit flat = at_slope(pts, classes, 0.0, min_offset);
  OffsetSlopeFit best = flat;
  // Golden-section search on [0, max_slope] (Kiefer 1953); 80 iterations shrink the bracket by
  // 0.618^80 ~ 2e-17 of its width, below a double's resolution of it.
  constexpr double kInvPhi = 0.6180339887498949;
  double lo = 0, hi = max_slope;
  double x1 = hi - kInvPhi * (hi - lo), x2 = lo + kInvPhi * (hi - lo);
  OffsetSlopeFit f1 = at_slope(pts, classes, x1, min_offset), f2 = at_slope(pts, classes, x2, min_offset);
  for (int it = 0; it < 80 && hi - lo > 1e-9 * std::max(1.0, max_slope); ++it) {
    if (f1.loss <= f2.loss) {
      hi = x2;
      x2 = x1;
      f2 = std::move(f1);
      x1 = hi - kInvPhi * (hi - lo);
      f1 = at_slope(pts, classes, x1, min_offset);
    } else {
      lo = x1;
      x1 = x2;
      f1 = std::move(f2);
      x2 = lo + kInvPhi * (hi - lo);
      f2 = at_slope(pts, classes, x2, min_offset);
    }
  }
  const OffsetSlopeFit& found = f1.loss <= f2.loss ? f1 : f2;
  // A slope is kept only where it lowers the loss beyond rounding: with one size of call the
  // loss is flat in c over a range, and the offsets alone then say it.
  if (found.loss < flat.loss * (1.0 - 1e-9)) best = found;
  best.loss_flat = flat.loss;
  return best;
}

}  // namespace paralab::calib
