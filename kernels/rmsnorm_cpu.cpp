// kernels/rmsnorm_cpu.cpp — CPU twin of RMSNorm (formulas and shapes: rmsnorm.hpp).
#include <cmath>
#include <vector>

#include "kernels/cpu_util.hpp"
#include "kernels/rmsnorm.hpp"

namespace paralab::kernels {
namespace {
constexpr const char* kFwd = "rmsnorm_fwd";
constexpr const char* kBwd = "rmsnorm_bwd";
}  // namespace

void rmsnorm_fwd_check(const RmsNormFwdArgs& a) {
  detail::check_positive(kFwd, "rows", a.rows);
  detail::check_positive(kFwd, "cols", a.cols);
  detail::check_float_dtype(kFwd, "dtype", a.dtype);
  detail::check_ptr(kFwd, "x", a.x);
  detail::check_ptr(kFwd, "gamma", a.gamma);
  detail::check_ptr(kFwd, "y", a.y);
  if (!(a.eps > 0.f) || !std::isfinite(a.eps))
    detail::fail_arg(kFwd, "eps", std::to_string(a.eps), "must be finite and > 0");
}

void rmsnorm_bwd_check(const RmsNormBwdArgs& a) {
  detail::check_positive(kBwd, "rows", a.rows);
  detail::check_positive(kBwd, "cols", a.cols);
  detail::check_float_dtype(kBwd, "dtype", a.dtype);
  detail::check_ptr(kBwd, "dy", a.dy);
  detail::check_ptr(kBwd, "x", a.x);
  detail::check_ptr(kBwd, "gamma", a.gamma);
  detail::check_ptr(kBwd, "rrms", a.rrms);
  detail::check_ptr(kBwd, "dx", a.dx);
}

void rmsnorm_fwd_cpu(const RmsNormFwdArgs& a) {
  rmsnorm_fwd_check(a);
  cpu::dispatch_float(a.dtype, kFwd, "dtype", [&](auto tag) {
    using T = decltype(tag);
    const int64_t C = a.cols;
    std::vector<float> row(C), gamma(C);
    cpu::load_row(cpu::as<T>(a.gamma), C, gamma.data());
    const T* x = cpu::as<T>(a.x);
    T* y = cpu::as<T>(a.y);
    for (int64_t r = 0; r < a.rows; ++r) {
      float* v = row.data();
      cpu::load_row(x + r * C, C, v);
      const float ms = cpu::dot8(v, v, C) / float(C);
      const float rrms = 1.f / std::sqrt(ms + a.eps);
      for (int64_t c = 0; c < C; ++c) v[c] = v[c] * rrms * gamma[c];
      cpu::store_row(v, C, y + r * C);
      if (a.rrms) a.rrms[r] = rrms;
    }
  });
}

void rmsnorm_bwd_cpu(const RmsNormBwdArgs& a) {
  rmsnorm_bwd_check(a);
  cpu::dispatch_float(a.dtype, kBwd, "dtype", [&](auto tag) {
    using T = decltype(tag);
    const int64_t C = a.cols;
    std::vector<float> dy(C), x(C), g(C), gamma(C), dg(C, 0.f);
    cpu::load_row(cpu::as<T>(a.gamma), C, gamma.data());
    const T* xp = cpu::as<T>(a.x);
    const T* dyp = cpu::as<T>(a.dy);
    T* dx = cpu::as<T>(a.dx);
    for (int64_t r = 0; r < a.rows; ++r) {
      cpu::load_row(dyp + r * C, C, dy.data());
      cpu::load_row(xp + r * C, C, x.data());
      const float rr = a.rrms[r];
      for (int64_t c = 0; c < C; ++c) {
        g[c] = dy[c] * gamma[c];
        dg[c] += dy[c] * (x[c] * rr);
      }
      const float k = rr * rr * (cpu::dot8(g.data(), x.data(), C) / float(C));
      for (int64_t c = 0; c < C; ++c) g[c] = rr * (g[c] - x[c] * k);
      cpu::store_row(g.data(), C, dx + r * C);
    }
    if (a.dgamma)
      for (int64_t c = 0; c < C; ++c) a.dgamma[c] = a.accumulate ? a.dgamma[c] + dg[c] : dg[c];
  });
}

}  // namespace paralab::kernels
