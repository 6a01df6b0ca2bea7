// paralab — the calibration's one robust fit: weighted least absolute deviations of a fixed cost
// and a factor, y = fixed + factor x (docs/calibration.md, "Corrections").
//
//   std::vector<calib::LadPoint> pts = ...;   // y measured, x modeled, weight 1 / y
//   calib::LadFit f = calib::fit_lad(pts, true);
//
// Minimizes sum_i w_i |y_i - fixed - factor x_i| over fixed >= min_fixed and factor in
// [0, max_factor]. With weights 1 / y this is the summed relative error, what the per-op MAPE
// scores (the median is the least-absolute-deviation constant: Laplace 1774; the weighted median
// minimizes the weighted sum: Edgeworth 1888). For a fixed factor the best fixed cost is the
// weighted median of y - factor x; the loss minimized over it is convex and piecewise linear in
// the factor (a partial minimum of a convex function), so a golden-section search finds its
// minimum. The factor stays 1 (the model's own scaling) unless another lowers the loss by more
// than a millionth of the weighted magnitude of y: with one size of op the loss is flat along fixed + factor x = const, and the data
// then say only the fixed cost. Deterministic: no randomness, ties toward the lower value.
#pragma once

#include <vector>

namespace paralab::calib {

struct LadPoint {
  double y = 0;  // measured (us)
  double x = 0;  // modeled (us)
  double w = 1;  // weight, >= 0
};

struct LadFit {
  double fixed = 0;
  double factor = 1;
  double loss = 0;       // sum_i w_i |residual_i| at the fit
  double mape_pct = 0;   // mean |residual| / y over the points with y > 0 (%)
};

// with_factor false: the factor is held at 1 and only the fixed cost is fitted. Throws
// std::invalid_argument for a non-finite value, a negative weight, or max_factor < 1.
LadFit fit_lad(const std::vector<LadPoint>& pts, bool with_factor, double max_factor = 20.0, double min_fixed = 0.0);

}  // namespace paralab::calib
