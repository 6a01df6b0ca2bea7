// tests/kernels/test_util.hpp — helpers shared by the kernel tests (CPU and GPU): seeded
// random data (never zeros), typed host buffers in any Dtype, error metrics, and central
// finite differences in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "kernels/dtype.hpp"

namespace paralab::kernels::test {

// Uniform reals in [lo, hi), seeded so every run sees the same data.
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(gen_); }
  int64_t integer(int64_t lo, int64_t hi) {  // inclusive
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen_);
  }
  std::vector<float> floats(int64_t n, double lo = -2.0, double hi = 2.0) {
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = float(uniform(lo, hi));
    return v;
  }
  uint64_t bits() { return gen_(); }

 private:
  std::mt19937_64 gen_;
};

// A host buffer of n elements stored in `dtype` (the bytes a kernel reads or writes).
class Buffer {
 public:
  Buffer() = default;
  Buffer(int64_t n, Dtype d) : n_(n), d_(d), bytes_(size_t(n * dtype_size(d))) {}
  Buffer(const std::vector<float>& v, Dtype d) : Buffer(int64_t(v.size()), d) {
    for (int64_t i = 0; i < n_; ++i) set(i, v[size_t(i)]);
  }
  void set(int64_t i, float x) {
    switch (d_) {
      case Dtype::f32: std::memcpy(&bytes_[size_t(i) * 4], &x, 4); break;
      case Dtype::bf16: put16(i, f32_to_bf16_bits(x)); break;
      case Dtype::f16: put16(i, f32_to_f16_bits(x)); break;
      case Dtype::f8e4m3: bytes_[size_t(i)] = f32_to_e4m3_bits(x); break;
      case Dtype::f8e5m2: bytes_[size_t(i)] = f32_to_e5m2_bits(x); break;
    }
  }
  float get(int64_t i) const {
    switch (d_) {
      case Dtype::f32: { float x; std::memcpy(&x, &bytes_[size_t(i) * 4], 4); return x; }
      case Dtype::bf16: return bf16_bits_to_f32(get16(i));
      case Dtype::f16: return f16_bits_to_f32(get16(i));
      case Dtype::f8e4m3: return e4m3_bits_to_f32(bytes_[size_t(i)]);
      case Dtype::f8e5m2: return e5m2_bits_to_f32(bytes_[size_t(i)]);
    }
    return 0.f;
  }
  std::vector<float> f32() const {
    std::vector<float> v(static_cast<size_t>(n_));
    for (int64_t i = 0; i < n_; ++i) v[size_t(i)] = get(i);
    return v;
  }
  std::vector<double> f64() const {
    std::vector<double> v(static_cast<size_t>(n_));
    for (int64_t i = 0; i < n_; ++i) v[size_t(i)] = get(i);
    return v;
  }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  int64_t size() const { return n_; }
  size_t bytes() const { return bytes_.size(); }
  Dtype dtype() const { return d_; }
  std::vector<uint8_t>& raw() { return bytes_; }
  const std::vector<uint8_t>& raw() const { return bytes_; }

 private:
  void put16(int64_t i, uint16_t b) { std::memcpy(&bytes_[size_t(i) * 2], &b, 2); }
  uint16_t get16(int64_t i) const {
    uint16_t b;
    std::memcpy(&b, &bytes_[size_t(i) * 2], 2);
    return b;
  }
  int64_t n_ = 0;
  Dtype d_ = Dtype::f32;
  std::vector<uint8_t> bytes_;
};

// Random values in `d`, returned as the buffer plus the exact (rounded) values in double:
// references are computed from what the kernel actually reads.
struct RandomTensor {
  Buffer buf;
  std::vector<double> ref;
};
inline RandomTensor random_tensor(Rng& rng, int64_t n, Dtype d, double lo = -2.0, double hi = 2.0) {
  RandomTensor t{Buffer(rng.floats(n, lo, hi), d), {}};
  t.ref = t.buf.f64();
  return t;
}

// Normwise relative error max_i |got_i - ref_i| / max_i |ref_i| (ref all-zero: absolute).
// NaN anywhere in got gives +Inf (never passes).
template <class G, class R>
double rel_err(const std::vector<G>& got, const std::vector<R>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = double(got[i]);
    if (std::isnan(g)) return INFINITY;
    num = std::max(num, std::fabs(g - double(ref[i])));
    den = std::max(den, std::fabs(double(ref[i])));
  }
  return den > 0 ? num / den : num;
}

inline bool any_nan(const std::vector<float>& v) {
  return std::any_of(v.begin(), v.end(), [](float x) { return std::isnan(x); });
}

// Central finite differences of a scalar function f at x, step h (double precision).
inline std::vector<double> fd_grad(const std::function<double(const std::vector<double>&)>& f,
                                   std::vector<double> x, double h = 1e-5) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double fp = f(x);
    x[i] = x0 - h;
    const double fm = f(x);
    x[i] = x0;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Tolerance of a kernel output stored in dtype d versus a double reference: fp32 rounding
// of the math, or one rounding of the stored result (bf16: 2^-8, f16: 2^-11) plus margin.
inline double tol_for(Dtype d) {
  switch (d) {
    case Dtype::f32: return 2e-5;
    case Dtype::bf16: return 1e-2;
    case Dtype::f16: return 2e-3;
    default: return 0.1;
  }
}

}  // namespace paralab::kernels::test
