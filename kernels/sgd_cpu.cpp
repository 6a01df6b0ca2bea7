// kernels/sgd_cpu.cpp — CPU twin of the SGD step (formulas and semantics: sgd.hpp).
#include "kernels/cpu_util.hpp"
#include "kernels/sgd.hpp"

namespace paralab::kernels {
namespace {
constexpr const char* kName = "sgd_step";
}

void sgd_check(const SgdArgs& a) {
  detail::check_positive(kName, "n", a.n);
  detail::check_float_dtype(kName, "grad_dtype", a.grad_dtype);
  if (a.param) detail::check_float_dtype(kName, "param_dtype", a.param_dtype);
  detail::check_ptr(kName, "master", a.master);
  detail::check_ptr(kName, "grad", a.grad);
  detail::check_ptr(kName, "momentum_buf", a.momentum_buf, a.momentum != 0.f);
  if (a.step < 1) detail::fail_arg(kName, "step", std::to_string(a.step), "counts from 1");
  detail::check_finite(kName, "lr", a.lr);
  detail::check_finite(kName, "momentum", a.momentum);
  detail::check_finite(kName, "dampening", a.dampening);
  detail::check_finite(kName, "weight_decay", a.weight_decay);
  detail::check_finite(kName, "grad_scale", a.grad_scale);
  if (a.nesterov && (a.momentum <= 0.f || a.dampening != 0.f))
    detail::fail_arg(kName, "nesterov", "true", "needs momentum > 0 and dampening = 0");
}

void sgd_step_cpu(const SgdArgs& a) {
  sgd_check(a);
  if (a.found_inf && *a.found_inf != 0) return;
  const float mult = a.loss_scale ? a.grad_scale / *a.loss_scale : a.grad_scale;
  const bool use_mom = a.momentum != 0.f, first = a.step == 1;
  const float mu = a.momentum, damp = 1.f - a.dampening;
  cpu::dispatch_float(a.grad_dtype, kName, "grad_dtype", [&](auto gtag) {
    using G = decltype(gtag);
    const G* grad = cpu::as<G>(a.grad);
    for (int64_t i = 0; i < a.n; ++i) {
      const float th = a.master[i];
      float g = to_f32(grad[i]) * mult + a.weight_decay * th;
      if (use_mom) {
        const float buf = first ? g : mu * a.momentum_buf[i] + damp * g;
        a.momentum_buf[i] = buf;
        g = a.nesterov ? g + mu * buf : buf;
      }
      a.master[i] = th - a.lr * g;
    }
  });
  if (a.param) {
    cpu::dispatch_float(a.param_dtype, kName, "param_dtype", [&](auto ptag) {
      using P = decltype(ptag);
      cpu::store_row(a.master, a.n, cpu::as<P>(a.param));
    });
  }
}

}  // namespace paralab::kernels
