// kernels/gelu_cpu.cpp — CPU twin of bias + GELU (formulas and shapes: gelu.hpp).
#include <vector>

#include "kernels/cpu_util.hpp"
#include "kernels/gelu.hpp"

namespace paralab::kernels {
namespace {
constexpr const char* kFwd = "gelu_fwd";
constexpr const char* kBwd = "gelu_bwd";
}  // namespace

void gelu_fwd_check(const GeluFwdArgs& a) {
  detail::check_positive(kFwd, "rows", a.rows);
  detail::check_positive(kFwd, "cols", a.cols);
  detail::check_float_dtype(kFwd, "dtype", a.dtype);
  detail::check_ptr(kFwd, "x", a.x);
  detail::check_ptr(kFwd, "y", a.y);
}

void gelu_bwd_check(const GeluBwdArgs& a) {
  detail::check_positive(kBwd, "rows", a.rows);
  detail::check_positive(kBwd, "cols", a.cols);
  detail::check_float_dtype(kBwd, "dtype", a.dtype);
  detail::check_ptr(kBwd, "dy", a.dy);
  detail::check_ptr(kBwd, "x", a.x);
  detail::check_ptr(kBwd, "dx", a.dx);
}

void gelu_fwd_cpu(const GeluFwdArgs& a) {
  gelu_fwd_check(a);
  cpu::dispatch_float(a.dtype, kFwd, "dtype", [&](auto tag) {
    using T = decltype(tag);
    const int64_t C = a.cols;
    std::vector<float> bias(C, 0.f), u(C);
    if (a.bias) cpu::load_row(cpu::as<T>(a.bias), C, bias.data());
    const T* x = cpu::as<T>(a.x);
    T* y = cpu::as<T>(a.y);
    for (int64_t r = 0; r < a.rows; ++r) {
      cpu::load_row(x + r * C, C, u.data());
      for (int64_t c = 0; c < C; ++c) u[c] = gelu_tanh(u[c] + bias[c]);
      cpu::store_row(u.data(), C, y + r * C);
    }
  });
}

void gelu_bwd_cpu(const GeluBwdArgs& a) {
  gelu_bwd_check(a);
  cpu::dispatch_float(a.dtype, kBwd, "dtype", [&](auto tag) {
    using T = decltype(tag);
    const int64_t C = a.cols;
    std::vector<float> bias(C, 0.f), u(C), d(C), db(C, 0.f);
    if (a.bias) cpu::load_row(cpu::as<T>(a.bias), C, bias.data());
    const T* x = cpu::as<T>(a.x);
    const T* dy = cpu::as<T>(a.dy);
    T* dx = cpu::as<T>(a.dx);
    for (int64_t r = 0; r < a.rows; ++r) {
      cpu::load_row(x + r * C, C, u.data());
      cpu::load_row(dy + r * C, C, d.data());
      for (int64_t c = 0; c < C; ++c) {
        d[c] *= gelu_tanh_grad(u[c] + bias[c]);
        db[c] += d[c];
      }
      cpu::store_row(d.data(), C, dx + r * C);
    }
    if (a.dbias)
      for (int64_t c = 0; c < C; ++c) a.dbias[c] = a.accumulate ? a.dbias[c] + db[c] : db[c];
  });
}

}  // namespace paralab::kernels
