// paralab — calibration fits: relative least squares with Eigen, non-negative by Lawson-Hanson.
#include "analysis/calibration/fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <Eigen/Dense>

namespace paralab::calib {

double LinearFit::predict(const std::vector<double>& x) const {
  double t = 0;
  for (size_t i = 0; i < x.size() && i < coef.size(); ++i) t += x[i] * coef[i];
  return t;
}

namespace {

// Least squares on the columns in `cols` of A (others held at 0).
Eigen::VectorXd solve_subset(const Eigen::MatrixXd& A, const Eigen::VectorXd& b, const std::vector<int>& cols) {
  Eigen::VectorXd x = Eigen::VectorXd::Zero(A.cols());
  if (cols.empty()) return x;
  Eigen::MatrixXd As(A.rows(), static_cast<Eigen::Index>(cols.size()));
  for (size_t j = 0; j < cols.size(); ++j) As.col(static_cast<Eigen::Index>(j)) = A.col(cols[j]);
  const Eigen::VectorXd s = As.colPivHouseholderQr().solve(b);
  for (size_t j = 0; j < cols.size(); ++j) x(cols[j]) = s(static_cast<Eigen::Index>(j));
  return x;
}

// Lawson & Hanson (1974), Algorithm NNLS (ch. 23): min ||A x - b|| subject to x >= 0.
Eigen::VectorXd nnls(const Eigen::MatrixXd& A, const Eigen::VectorXd& b, const std::vector<int>& usable) {
  const Eigen::Index n = A.cols();
  Eigen::VectorXd x = Eigen::VectorXd::Zero(n);
  std::vector<bool> passive(static_cast<size_t>(n), false), allowed(static_cast<size_t>(n), false);
  for (int j : usable) allowed[static_cast<size_t>(j)] = true;
  const double tol = 1e-12 * std::max(1.0, A.norm() * b.norm());
  for (int outer = 0; outer < 3 * static_cast<int>(n) + 10; ++outer) {
    const Eigen::VectorXd w = A.transpose() * (b - A * x);
    int t = -1;
    double best = tol;
    for (Eigen::Index j = 0; j < n; ++j)
      if (allowed[static_cast<size_t>(j)] && !passive[static_cast<size_t>(j)] && w(j) > best) {
        best = w(j);
        t = static_cast<int>(j);
      }
    if (t < 0) break;
    passive[static_cast<size_t>(t)] = true;
    for (int inner = 0; inner < 3 * static_cast<int>(n) + 10; ++inner) {
      std::vector<int> P;
      for (Eigen::Index j = 0; j < n; ++j)
        if (passive[static_cast<size_t>(j)]) P.push_back(static_cast<int>(j));
      const Eigen::VectorXd s = solve_subset(A, b, P);
      bool feasible = true;
      for (int j : P) feasible &= s(j) > 0;
      if (feasible) {
        x = s;
        break;
      }
      double alpha = 1.0;
      for (int j : P)
        if (s(j) <= 0) alpha = std::min(alpha, x(j) / (x(j) - s(j)));
      x += alpha * (s - x);
      for (int j : P)
        if (x(j) <= 1e-15 * std::max(1.0, std::abs(s(j)))) {
          x(j) = 0;
          passive[static_cast<size_t>(j)] = false;
        }
    }
  }
  return x;
}

}  // namespace

LinearFit relative_least_squares(const std::vector<std::vector<double>>& X, const std::vector<double>& y, bool nonneg,
                                 const std::vector<double>& w) {
  if (X.empty() || X.size() != y.size()) throw std::invalid_argument("least squares: no samples, or X and y differ in length");
  if (!w.empty() && w.size() != y.size()) throw std::invalid_argument("least squares: weights and y differ in length");
  const size_t p = X.front().size();
  if (p == 0) throw std::invalid_argument("least squares: no features");
  const Eigen::Index rows = static_cast<Eigen::Index>(X.size()), cols = static_cast<Eigen::Index>(p);
  // Relative residuals: row i divided by y_i, target 1. Columns scaled to unit norm (the
  // features span 1 to 1e12), solved, unscaled.
  Eigen::MatrixXd A(rows, cols);
  Eigen::VectorXd b = Eigen::VectorXd::Ones(rows);
  for (Eigen::Index i = 0; i < rows; ++i) {
    const auto& r = X[static_cast<size_t>(i)];
    if (r.size() != p) throw std::invalid_argument("least squares: rows of different lengths");
    const double yi = y[static_cast<size_t>(i)];
    if (!(yi > 0) || !std::isfinite(yi)) throw std::invalid_argument("least squares: measured values must be > 0");
    const double wi = w.empty() ? 1.0 : w[static_cast<size_t>(i)];
    if (!(wi >= 0) || !std::isfinite(wi)) throw std::invalid_argument("least squares: weights must be >= 0");
    const double sw = std::sqrt(wi);
    b(i) = sw;
    for (Eigen::Index j = 0; j < cols; ++j) A(i, j) = sw * r[static_cast<size_t>(j)] / yi;
  }
  Eigen::VectorXd scale(cols);
  std::vector<int> usable;
  for (Eigen::Index j = 0; j < cols; ++j) {
    const double nrm = A.col(j).norm();
    scale(j) = nrm > 0 ? nrm : 1.0;
    A.col(j) /= scale(j);
    if (nrm > 0) usable.push_back(static_cast<int>(j));
  }
  Eigen::VectorXd x = nonneg ? nnls(A, b, usable) : solve_subset(A, b, usable);
  LinearFit f;
  f.samples = rows;
  f.coef.resize(p);
  f.clamped.resize(p);
  for (Eigen::Index j = 0; j < cols; ++j) {
    f.coef[static_cast<size_t>(j)] = x(j) / scale(j);
    f.clamped[static_cast<size_t>(j)] = nonneg && x(j) == 0.0;
  }
  double ss = 0;
  for (size_t i = 0; i < X.size(); ++i) {
    const double rel = (f.predict(X[i]) - y[i]) / y[i];
    ss += rel * rel;
    f.max_rel_error = std::max(f.max_rel_error, std::abs(rel));
  }
  f.rms_rel_error = std::sqrt(ss / static_cast<double>(X.size()));
  return f;
}

// ---- GEMMs -----------------------------------------------------------------------------------

std::vector<double> gemm_features(int64_t m, int64_t n, int64_t k, int64_t batch) {
  const double M = static_cast<double>(m), N = static_cast<double>(n), K = static_cast<double>(k),
               B = static_cast<double>(batch);
  return {B, 2.0 * M * N * K * B, (M * K + K * N) * B, M * N * B};
}

double GemmFit::predict_us(int64_t m, int64_t n, int64_t k, int64_t batch) const {
  return fit.predict(gemm_features(m, n, k, batch));
}

double GemmFit::efficiency_vs_rate(int64_t m, int64_t n, int64_t k, int64_t batch) const {
  const double t = predict_us(m, n, k, batch);
  if (t <= 0 || flop_per_us <= 0) return 0;
  return (2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(batch) /
          flop_per_us) / t;
}

GemmFit fit_gemm(const std::vector<GemmSample>& samples, MathMode math) {
  std::vector<std::vector<double>> X;
  std::vector<double> y;
  for (const GemmSample& s : samples) {
    if (s.math != math || s.time_us <= 0) continue;
    X.push_back(gemm_features(s.m, s.n, s.k, s.batch));
    y.push_back(s.time_us);
  }
  if (X.empty()) throw std::invalid_argument("GEMM fit: no samples for this math mode");
  GemmFit g;
  g.math = math;
  g.fit = relative_least_squares(X, y, true);
  g.call_us = g.fit.coef[0];
  g.flop_per_us = g.fit.coef[1] > 0 ? 1.0 / g.fit.coef[1] : 0.0;
  g.pack_us_per_elem = g.fit.coef[2];
  g.store_us_per_elem = g.fit.coef[3];
  return g;
}

// ---- Streaming ---------------------------------------------------------------------------------

double StreamFit::predict_us(double bytes) const { return fit.predict({1.0, bytes}); }

StreamFit fit_streaming(const std::vector<StreamSample>& samples) {
  std::vector<std::vector<double>> X;
  std::vector<double> y;
  for (const StreamSample& s : samples) {
    if (s.time_us <= 0) continue;
    X.push_back({1.0, s.bytes});
    y.push_back(s.time_us);
  }
  if (X.empty()) throw std::invalid_argument("streaming fit: no samples");
  StreamFit f;
  f.fit = relative_least_squares(X, y, true);
  f.latency_us = f.fit.coef[0];
  f.bytes_per_us = f.fit.coef[1] > 0 ? 1.0 / f.fit.coef[1] : 0.0;
  return f;
}

// ---- Communication -------------------------------------------------------------------------------

std::string_view to_string(CommPattern p) {
  switch (p) {
    case CommPattern::all_reduce: return "all_reduce";
    case CommPattern::all_gather: return "all_gather";
    case CommPattern::reduce_scatter: return "reduce_scatter";
    case CommPattern::broadcast: return "broadcast";
    case CommPattern::all_to_all: return "all_to_all";
    case CommPattern::send_recv: return "send_recv";
  }
  return "?";
}

double comm_steps(CommPattern p, int64_t group) {
  const double n = static_cast<double>(std::max<int64_t>(group, 1));
  switch (p) {
    case CommPattern::all_reduce: return 2.0 * (n - 1);
    case CommPattern::all_gather:
    case CommPattern::reduce_scatter:
    case CommPattern::broadcast: return n - 1;
    case CommPattern::all_to_all:
    case CommPattern::send_recv: return 1.0;
  }
  return 1.0;
}

double comm_wire_bytes(CommPattern p, int64_t group, double bytes) {
  const double n = static_cast<double>(std::max<int64_t>(group, 1));
  switch (p) {
    case CommPattern::all_reduce: return 2.0 * (n - 1) / n * bytes;
    case CommPattern::all_gather:
    case CommPattern::reduce_scatter:
    case CommPattern::all_to_all: return (n - 1) / n * bytes;
    case CommPattern::broadcast:
    case CommPattern::send_recv: return bytes;
  }
  return bytes;
}

double comm_reduced_bytes(CommPattern p, int64_t group, double bytes) {
  const double n = static_cast<double>(std::max<int64_t>(group, 1));
  return p == CommPattern::all_reduce || p == CommPattern::reduce_scatter ? (n - 1) / n * bytes : 0.0;
}

namespace {
// The fit's features of a call: 1 (L), steps (alpha), wire bytes (1/B), reduced bytes (1/R).
std::vector<double> comm_features(CommPattern p, int64_t group, double bytes) {
  return {1.0, comm_steps(p, group), comm_wire_bytes(p, group, bytes), comm_reduced_bytes(p, group, bytes)};
}
}  // namespace

double AlphaBetaFit::predict_us(CommPattern p, int64_t group, double bytes) const {
  return fit.predict(comm_features(p, group, bytes));
}

double AlphaBetaFit::bytes_us(CommPattern p, int64_t group, double bytes) const {
  // comm_features' last two: wire bytes (coefficient 1/B) and reduced bytes (1/R).
  if (fit.coef.size() != 4) return 0.0;
  return fit.coef[2] * comm_wire_bytes(p, group, bytes) + fit.coef[3] * comm_reduced_bytes(p, group, bytes);
}

CommPattern pattern_of(CollKind k) {
  switch (k) {
    case CollKind::all_reduce: return CommPattern::all_reduce;
    case CollKind::all_gather: return CommPattern::all_gather;
    case CollKind::reduce_scatter: return CommPattern::reduce_scatter;
    case CollKind::all_to_all: return CommPattern::all_to_all;
    case CollKind::broadcast:
    case CollKind::reduce: return CommPattern::broadcast;  // rooted chains: N per edge
    case CollKind::gather:
    case CollKind::scatter: return CommPattern::all_gather;  // (n-1)/n N through the root's link
  }
  return CommPattern::all_reduce;
}

AlphaBetaFit fit_alpha_beta(const std::vector<CommSample>& samples) {
  std::vector<std::vector<double>> X;
  std::vector<double> y, w;
  for (const CommSample& s : samples) {
    if (s.time_us <= 0 || s.weight <= 0) continue;
    X.push_back(comm_features(s.pattern, s.group, s.bytes));
    y.push_back(s.time_us);
    w.push_back(s.weight);
  }
  if (X.empty()) throw std::invalid_argument("alpha-beta fit: no samples");
  AlphaBetaFit f;
  f.fit = relative_least_squares(X, y, true, w);
  f.launch_us = f.fit.coef[0];
  f.step_us = f.fit.coef[1];
  f.bytes_per_us = f.fit.coef[2] > 0 ? 1.0 / f.fit.coef[2] : 0.0;
  f.reduce_bytes_per_us = f.fit.coef[3] > 0 ? 1.0 / f.fit.coef[3] : 0.0;
  return f;
}

}  // namespace paralab::calib
