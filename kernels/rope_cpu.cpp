// kernels/rope_cpu.cpp — CPU twin of rotary embeddings (formulas and shapes: rope.hpp).
// cos/sin of a row are computed once (double) and shared by all heads of the row; rows of
// the same position (batch > 1) reuse them.
#include <cmath>
#include <vector>

#include "kernels/cpu_util.hpp"
#include "kernels/rope.hpp"

namespace paralab::kernels {
namespace {

void rope_cpu(const RopeArgs& a, const char* kernel, float dir) {
  rope_check(a, kernel);
  cpu::dispatch_float(a.dtype, kernel, "dtype", [&](auto tag) {
    using T = decltype(tag);
    const int64_t D = a.rotary_dim > 0 ? a.rotary_dim : a.head_dim, half = D / 2;
    const int64_t HD = a.head_dim, row_len = a.heads * HD;
    std::vector<double> inv_freq(half);
    for (int64_t i = 0; i < half; ++i)
      inv_freq[i] = std::pow(a.base, -2.0 * double(i) / double(D));
    std::vector<float> cs(half), sn(half), v(row_len);
    int64_t cached_pos = -1;
    const T* x = cpu::as<T>(a.x);
    T* y = cpu::as<T>(a.y);
    for (int64_t r = 0; r < a.rows; ++r) {
      const int64_t pos = r / a.batch + a.position_offset;
      if (pos != cached_pos) {
        for (int64_t i = 0; i < half; ++i) {
          const double ang = double(pos) * inv_freq[i];
          cs[i] = float(std::cos(ang));
          sn[i] = dir * float(std::sin(ang));
        }
        cached_pos = pos;
      }
      cpu::load_row(x + r * row_len, row_len, v.data());
      for (int64_t h = 0; h < a.heads; ++h) {
        float* p = v.data() + h * HD;
        for (int64_t i = 0; i < half; ++i) {
          const float x1 = p[i], x2 = p[i + half];
          p[i] = x1 * cs[i] - x2 * sn[i];
          p[i + half] = x2 * cs[i] + x1 * sn[i];
        }
      }
      cpu::store_row(v.data(), row_len, y + r * row_len);
    }
  });
}

}  // namespace

void rope_check(const RopeArgs& a, const char* k) {
  detail::check_positive(k, "rows", a.rows);
  detail::check_positive(k, "heads", a.heads);
  detail::check_positive(k, "head_dim", a.head_dim);
  detail::check_positive(k, "batch", a.batch);
  detail::check_float_dtype(k, "dtype", a.dtype);
  const int64_t D = a.rotary_dim > 0 ? a.rotary_dim : a.head_dim;
  if (a.rotary_dim < 0 || D > a.head_dim || D % 2 != 0)
    detail::fail_arg(k, "rotary_dim", std::to_string(a.rotary_dim),
                     "must be 0 (= head_dim) or even and <= head_dim, and the rotated width "
                     "must be even");
  if (a.position_offset < 0)
    detail::fail_arg(k, "position_offset", std::to_string(a.position_offset), "must be >= 0");
  if (!(a.base > 0.0) || !std::isfinite(a.base))
    detail::fail_arg(k, "base", std::to_string(a.base), "must be finite and > 0");
  detail::check_ptr(k, "x", a.x);
  detail::check_ptr(k, "y", a.y);
}

void rope_fwd_cpu(const RopeArgs& a) { rope_cpu(a, "rope_fwd", 1.f); }
void rope_bwd_cpu(const RopeArgs& a) { rope_cpu(a, "rope_bwd", -1.f); }

}  // namespace paralab::kernels
