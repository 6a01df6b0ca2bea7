// kernels/softmax_cpu.cpp — CPU twin of the scaled masked softmax (semantics: softmax.hpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu_util.hpp"
#include "kernels/softmax.hpp"

namespace paralab::kernels {
namespace {
constexpr const char* kFwd = "scaled_masked_softmax_fwd";
constexpr const char* kBwd = "scaled_masked_softmax_bwd";
}  // namespace

void softmax_fwd_check(const SoftmaxFwdArgs& a) {
  detail::check_positive(kFwd, "batches", a.batches);
  detail::check_positive(kFwd, "sq", a.sq);
  detail::check_positive(kFwd, "sk", a.sk);
  detail::check_positive(kFwd, "heads", a.heads);
  if (a.batches % a.heads != 0)
    detail::fail_arg(kFwd, "heads", std::to_string(a.heads), "must divide batches");
  detail::check_float_dtype(kFwd, "dtype", a.dtype);
  detail::check_ptr(kFwd, "x", a.x);
  detail::check_ptr(kFwd, "y", a.y);
  detail::check_finite(kFwd, "scale", a.scale);
}

void softmax_bwd_check(const SoftmaxBwdArgs& a) {
  detail::check_positive(kBwd, "batches", a.batches);
  detail::check_positive(kBwd, "sq", a.sq);
  detail::check_positive(kBwd, "sk", a.sk);
  detail::check_float_dtype(kBwd, "dtype", a.dtype);
  detail::check_ptr(kBwd, "dy", a.dy);
  detail::check_ptr(kBwd, "y", a.y);
  detail::check_ptr(kBwd, "dx", a.dx);
  detail::check_finite(kBwd, "scale", a.scale);
}

void scaled_masked_softmax_fwd_cpu(const SoftmaxFwdArgs& a) {
  softmax_fwd_check(a);
  cpu::dispatch_float(a.dtype, kFwd, "dtype", [&](auto tag) {
    using T = decltype(tag);
    const int64_t sq = a.sq, sk = a.sk;
    const float ninf = -std::numeric_limits<float>::infinity();
    std::vector<float> v(sk);
    const T* x = cpu::as<T>(a.x);
    T* y = cpu::as<T>(a.y);
    for (int64_t n = 0; n < a.batches; ++n) {
      for (int64_t i = 0; i < sq; ++i) {
        const int64_t row = n * sq + i;
        // Keys [0, limit) pass the causal test; limit may be <= 0 (row fully masked).
        const int64_t limit = a.causal ? std::min(sk, i + (sk - sq) + 1) : sk;
        const uint8_t* m = a.mask ? a.mask + ((n / a.heads) * sq + i) * sk : nullptr;
        // Only keys [0, limit) can be unmasked; the rest are written as zeros.
        const int64_t kn = std::max<int64_t>(0, limit);
        cpu::load_row(x + row * sk, kn, v.data());
        float mx = ninf;
        for (int64_t j = 0; j < kn; ++j) {
          v[j] = (m && m[j]) ? ninf : v[j] * a.scale;
          mx = std::max(mx, v[j]);
        }
        if (mx == ninf) {  // nothing unmasked: zeros, not exp(-inf - -inf) = NaN
          std::fill(v.begin(), v.end(), 0.f);
        } else {
          for (int64_t j = 0; j < kn; ++j) v[j] = std::exp(v[j] - mx);  // exp(-inf) = 0
          const float inv = 1.f / cpu::sum8(v.data(), kn);
          for (int64_t j = 0; j < kn; ++j) v[j] *= inv;
          std::fill(v.begin() + kn, v.end(), 0.f);
        }
        cpu::store_row(v.data(), sk, y + row * sk);
      }
    }
  });
}

void scaled_masked_softmax_bwd_cpu(const SoftmaxBwdArgs& a) {
  softmax_bwd_check(a);
  cpu::dispatch_float(a.dtype, kBwd, "dtype", [&](auto tag) {
    using T = decltype(tag);
    const int64_t sk = a.sk, rows = a.batches * a.sq;
    std::vector<float> dy(sk), y(sk);
    const T* dyp = cpu::as<T>(a.dy);
    const T* yp = cpu::as<T>(a.y);
    T* dx = cpu::as<T>(a.dx);
    for (int64_t r = 0; r < rows; ++r) {
      cpu::load_row(dyp + r * sk, sk, dy.data());
      cpu::load_row(yp + r * sk, sk, y.data());
      const float s = cpu::dot8(dy.data(), y.data(), sk);
      for (int64_t j = 0; j < sk; ++j) dy[j] = a.scale * y[j] * (dy[j] - s);
      cpu::store_row(dy.data(), sk, dx + r * sk);
    }
  });
}

}  // namespace paralab::kernels
