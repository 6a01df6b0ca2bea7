// kernels/adamw_cpu.cpp — CPU twin of the AdamW step (formulas and semantics: adamw.hpp).
#include <cmath>

#include "kernels/adamw.hpp"
#include "kernels/cpu_util.hpp"

namespace paralab::kernels {
namespace {
constexpr const char* kName = "adamw_step";
}

void adamw_check(const AdamWArgs& a) {
  detail::check_positive(kName, "n", a.n);
  detail::check_float_dtype(kName, "grad_dtype", a.grad_dtype);
  if (a.param) detail::check_float_dtype(kName, "param_dtype", a.param_dtype);
  detail::check_ptr(kName, "master", a.master);
  detail::check_ptr(kName, "exp_avg", a.exp_avg);
  detail::check_ptr(kName, "exp_avg_sq", a.exp_avg_sq);
  detail::check_ptr(kName, "grad", a.grad);
  if (a.step < 1) detail::fail_arg(kName, "step", std::to_string(a.step), "counts from 1");
  detail::check_range(kName, "beta1", a.beta1, 0.0, 0.999999999, "must be in [0, 1)");
  detail::check_range(kName, "beta2", a.beta2, 0.0, 0.999999999, "must be in [0, 1)");
  detail::check_range(kName, "eps", a.eps, 0.0, 1e30, "must be >= 0");
  detail::check_finite(kName, "lr", a.lr);
  detail::check_finite(kName, "weight_decay", a.weight_decay);
  detail::check_finite(kName, "grad_scale", a.grad_scale);
}

namespace detail {
// Elements [begin, end) of the step: every element is independent, so any split of [0, n)
// gives the same bits (adamw_step_host's threads).
void adamw_range(const AdamWArgs& a, int64_t begin, int64_t end) {
  const double bc1 = 1.0 - std::pow(double(a.beta1), double(a.step));
  const double bc2 = 1.0 - std::pow(double(a.beta2), double(a.step));
  const float step_size = float(double(a.lr) / bc1);
  const float inv_sqrt_bc2 = float(1.0 / std::sqrt(bc2));
  const float decay = a.lr * a.weight_decay;
  const float mult = a.loss_scale ? a.grad_scale / *a.loss_scale : a.grad_scale;
  const float b1 = a.beta1, b2 = a.beta2, c1 = 1.f - a.beta1, c2 = 1.f - a.beta2;
  cpu::dispatch_float(a.grad_dtype, kName, "grad_dtype", [&](auto gtag) {
    using G = decltype(gtag);
    const G* grad = cpu::as<G>(a.grad);
    for (int64_t i = begin; i < end; ++i) {
      const float g = to_f32(grad[i]) * mult;
      const float m = b1 * a.exp_avg[i] + c1 * g;
      const float v = b2 * a.exp_avg_sq[i] + c2 * g * g;
      a.exp_avg[i] = m;
      a.exp_avg_sq[i] = v;
      const float th = a.master[i];
      a.master[i] = th - decay * th - step_size * m / (std::sqrt(v) * inv_sqrt_bc2 + a.eps);
    }
  });
  if (a.param) {
    cpu::dispatch_float(a.param_dtype, kName, "param_dtype", [&](auto ptag) {
      using P = decltype(ptag);
      cpu::store_row(a.master + begin, end - begin, cpu::as<P>(a.param) + begin);
    });
  }
}
}  // namespace detail

void adamw_step_cpu(const AdamWArgs& a) {
  adamw_check(a);
  if (a.found_inf && *a.found_inf != 0) return;  // overflow this step: skip the update
  detail::adamw_range(a, 0, a.n);
}

}  // namespace paralab::kernels
