// paralab — least absolute (weighted) deviations with one offset per class and one shared
// slope: how the calibration splits the in-situ communication time beyond its alpha-beta fit
// into a per-call cost and a slow-down of the bytes part (docs/calibration.md, "In-situ
// execution").
//
//   std::vector<calib::LadPoint> pts = ...;   // y = a[class] + c x, weight 1 / call time
//   calib::OffsetSlopeFit f = calib::fit_offsets_slope(pts, 2, 20.0, 0.0);
//   // f.offset[0], f.offset[1]: per class (us); f.slope: c, in [0, 20]
//
// Minimizes sum_i w_i |y_i - a_{class_i} - c x_i| over the offsets a and c in [0, max_slope].
// With weights 1 / measured time this is the calls' summed relative error, what `compare`'s
// per-op MAPE scores (a median is the least-absolute-deviation constant: Laplace 1774; the
// weighted median minimizes the weighted sum, Edgeworth 1888). For a fixed c each offset is
// its class's weighted median of y - c x; the loss minimized over the offsets is convex and
// piecewise linear in c (a partial minimum of a convex function), so a golden-section search
// on c finds its minimum. Deterministic: no randomness, ties broken toward the lower value.
#pragma once

#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

namespace paralab::calib {

struct LadPoint {
  double y = 0;      // the response (us)
  double x = 0;      // the regressor the slope multiplies (us)
  double w = 1;      // weight, >= 0
  size_t cls = 0;    // which offset: < the fit's class count
};

struct OffsetSlopeFit {
  std::vector<double> offset;  // per class; 0 for a class without points
  double slope = 0;            // c in [0, max_slope]; 0 unless it lowers the loss
  double loss = 0;             // sum_i w_i |residual_i| at the fit
  double loss_flat = 0;        // the same with c = 0 (offsets alone)
};

// The value m minimizing sum w |v - m| over (value, weight) pairs: the lowest value at which
// the cumulative weight reaches half of the total. 0 for no pairs or zero total weight.
double weighted_median(std::vector<std::pair<double, double>> value_weight);

// The offsets are held at or above `min_offset` (the constrained minimum of a convex function
// of one offset is its unconstrained one, projected). Throws std::invalid_argument for
// classes == 0, a point's class out of range, a negative or non-finite weight, a non-finite y
// or x, or max_slope < 0.
OffsetSlopeFit fit_offsets_slope(const std::vector<LadPoint>& pts, size_t classes, double max_slope,
                                 double min_offset = -std::numeric_limits<double>::infinity());

}  // namespace paralab::calib
