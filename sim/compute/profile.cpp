// paralab — measured op-time lookups: exact points, interpolation and model-ratio scaling
// (rules in profile.hpp and docs/simulator.md, "Measured op times").
#include "sim/compute/profile.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/compute/compute_model.hpp"

namespace paralab::sim {

ProfileTable::ProfileTable(const Calibration& cal, const DeviceSpec& dev) : dev_(dev), gemm_(cal.gemm) {
  for (const KernelPoint& p : cal.kernels) {
    if (p.time_us <= 0) continue;
    kernels_[static_cast<size_t>(p.kind)].push_back(p);
    ++kernel_count_;
  }
  for (auto& v : kernels_)
    std::stable_sort(v.begin(), v.end(), [](const KernelPoint& a, const KernelPoint& b) { return a.bytes < b.bytes; });
  std::erase_if(gemm_, [](const GemmPoint& p) { return p.time_us <= 0 || p.m <= 0 || p.n <= 0 || p.k <= 0 || p.batch <= 0; });
}

double ProfileTable::gemm_shape_model_us(const GemmAttrs& g) const { return gemm_shape_us(g, -1.0, dev_); }

double ProfileTable::kernel_bytes_model_us(double bytes) const { return streaming_us(bytes, 0.0, dev_); }

std::optional<double> ProfileTable::gemm_us(const GemmAttrs& g) const {
  const GemmPoint* nearest = nullptr;
  double best = std::numeric_limits<double>::infinity();
  auto lr = [](int64_t a, int64_t b) {
    return std::abs(std::log(static_cast<double>(std::max<int64_t>(a, 1)) / static_cast<double>(std::max<int64_t>(b, 1))));
  };
  for (const GemmPoint& p : gemm_) {
    if (p.math != g.math) continue;
    if (p.m == g.m && p.n == g.n && p.k == g.k && p.batch == g.batch) return p.time_us;
    const double d = lr(p.m, g.m) + lr(p.n, g.n) + lr(p.k, g.k) + lr(p.batch, g.batch);
    if (d < best) {
      best = d;
      nearest = &p;
    }
  }
  if (!nearest) return std::nullopt;
  GemmAttrs at = g;
  at.m = nearest->m;
  at.n = nearest->n;
  at.k = nearest->k;
  at.batch = nearest->batch;
  return nearest->time_us * gemm_shape_model_us(g) / gemm_shape_model_us(at);
}

std::optional<double> ProfileTable::kernel_us(OpKind kind, double bytes) const {
  const auto& pts = kernels_[static_cast<size_t>(kind)];
  if (pts.empty()) return std::nullopt;
  // First point with bytes >= the op's.
  const auto hi = std::lower_bound(pts.begin(), pts.end(), bytes,
                                   [](const KernelPoint& p, double b) { return static_cast<double>(p.bytes) < b; });
  if (hi != pts.end() && static_cast<double>(hi->bytes) == bytes) return hi->time_us;
  if (hi != pts.end() && hi != pts.begin()) {
    const KernelPoint& lo = *(hi - 1);
    const double x0 = static_cast<double>(lo.bytes), x1 = static_cast<double>(hi->bytes);
    const double w = (bytes - x0) / (x1 - x0);
    return lo.time_us + w * (hi->time_us - lo.time_us);
  }
  const KernelPoint& near = hi == pts.end() ? pts.back() : pts.front();
  return near.time_us * kernel_bytes_model_us(bytes) / kernel_bytes_model_us(static_cast<double>(near.bytes));
}

}  // namespace paralab::sim
