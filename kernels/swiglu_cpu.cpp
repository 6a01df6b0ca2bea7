// kernels/swiglu_cpu.cpp — CPU twin of SwiGLU (formulas and shapes: swiglu.hpp).
#include <vector>

#include "kernels/cpu_util.hpp"
#include "kernels/swiglu.hpp"

namespace paralab::kernels {
namespace {
constexpr const char* kFwd = "swiglu_fwd";
constexpr const char* kBwd = "swiglu_bwd";
}  // namespace

void swiglu_fwd_check(const SwigluFwdArgs& a) {
  detail::check_positive(kFwd, "rows", a.rows);
  detail::check_positive(kFwd, "f", a.f);
  detail::check_float_dtype(kFwd, "dtype", a.dtype);
  detail::check_ptr(kFwd, "x", a.x);
  detail::check_ptr(kFwd, "y", a.y);
}

void swiglu_bwd_check(const SwigluBwdArgs& a) {
  detail::check_positive(kBwd, "rows", a.rows);
  detail::check_positive(kBwd, "f", a.f);
  detail::check_float_dtype(kBwd, "dtype", a.dtype);
  detail::check_ptr(kBwd, "dy", a.dy);
  detail::check_ptr(kBwd, "x", a.x);
  detail::check_ptr(kBwd, "dx", a.dx);
}

void swiglu_fwd_cpu(const SwigluFwdArgs& a) {
  swiglu_fwd_check(a);
  cpu::dispatch_float(a.dtype, kFwd, "dtype", [&](auto tag) {
    using T = decltype(tag);
    const int64_t F = a.f;
    std::vector<float> g(F), u(F);
    const T* x = cpu::as<T>(a.x);
    T* y = cpu::as<T>(a.y);
    for (int64_t r = 0; r < a.rows; ++r) {
      cpu::load_row(x + r * 2 * F, F, g.data());
      cpu::load_row(x + r * 2 * F + F, F, u.data());
      for (int64_t c = 0; c < F; ++c) g[c] = silu(g[c]) * u[c];
      cpu::store_row(g.data(), F, y + r * F);
    }
  });
}

void swiglu_bwd_cpu(const SwigluBwdArgs& a) {
  swiglu_bwd_check(a);
  cpu::dispatch_float(a.dtype, kBwd, "dtype", [&](auto tag) {
    using T = decltype(tag);
    const int64_t F = a.f;
    std::vector<float> g(F), u(F), d(F), dg(F), du(F);
    const T* x = cpu::as<T>(a.x);
    const T* dy = cpu::as<T>(a.dy);
    T* dx = cpu::as<T>(a.dx);
    for (int64_t r = 0; r < a.rows; ++r) {
      cpu::load_row(x + r * 2 * F, F, g.data());
      cpu::load_row(x + r * 2 * F + F, F, u.data());
      cpu::load_row(dy + r * F, F, d.data());
      for (int64_t c = 0; c < F; ++c) {
        dg[c] = d[c] * u[c] * silu_grad(g[c]);
        du[c] = d[c] * silu(g[c]);
      }
      cpu::store_row(dg.data(), F, dx + r * 2 * F);
      cpu::store_row(du.data(), F, dx + r * 2 * F + F);
    }
  });
}

}  // namespace paralab::kernels
