// kernels/loss_scale_cpu.cpp — CPU twins of overflow check, unscale and the dynamic loss
// scale update (algorithm and call order: loss_scale.hpp).
#include <cmath>

#include "kernels/cpu_util.hpp"
#include "kernels/loss_scale.hpp"

namespace paralab::kernels {

void check_overflow_check(const CheckOverflowArgs& a) {
  const char* k = "check_overflow";
  detail::check_positive(k, "n", a.n);
  detail::check_float_dtype(k, "dtype", a.dtype);
  detail::check_ptr(k, "buf", a.buf);
  detail::check_ptr(k, "found_inf", a.found_inf);
}

void unscale_check(const UnscaleArgs& a) {
  const char* k = "unscale";
  detail::check_positive(k, "n", a.n);
  detail::check_float_dtype(k, "dtype", a.dtype);
  detail::check_ptr(k, "buf", a.buf);
  detail::check_ptr(k, "scale", a.scale);
}

void loss_scale_config_check(const LossScaleConfig& c) {
  const char* k = "update_scale";
  if (!(c.growth_factor >= 1.f) || !std::isfinite(c.growth_factor))
    detail::fail_arg(k, "growth_factor", std::to_string(c.growth_factor), "must be >= 1");
  if (!(c.backoff_factor > 0.f && c.backoff_factor < 1.f))
    detail::fail_arg(k, "backoff_factor", std::to_string(c.backoff_factor),
                     "must be in (0, 1)");
  detail::check_positive(k, "growth_interval", c.growth_interval);
}

void check_overflow_cpu(const CheckOverflowArgs& a) {
  check_overflow_check(a);
  cpu::dispatch_float(a.dtype, "check_overflow", "dtype", [&](auto tag) {
    using T = decltype(tag);
    const T* x = cpu::as<T>(a.buf);
    // x - x is 0 for finite x and NaN for Inf/NaN: one branch-free test per element.
    bool bad = false;
    for (int64_t i = 0; i < a.n; ++i) {
      const float v = to_f32(x[i]);
      bad |= !(v - v == 0.f);
    }
    if (bad) *a.found_inf = 1;
  });
}

void unscale_cpu(const UnscaleArgs& a) {
  unscale_check(a);
  const float inv = 1.f / *a.scale;
  cpu::dispatch_float(a.dtype, "unscale", "dtype", [&](auto tag) {
    using T = decltype(tag);
    T* x = cpu::as<T>(a.buf);
    bool bad = false;
    for (int64_t i = 0; i < a.n; ++i) {
      const float v = to_f32(x[i]);
      bad |= !(v - v == 0.f);
      x[i] = from_f32<T>(v * inv);
    }
    if (bad && a.found_inf) *a.found_inf = 1;
  });
}

bool update_scale_cpu(LossScaleState* s, const LossScaleConfig& cfg) {
  detail::check_ptr("update_scale", "state", s);
  loss_scale_config_check(cfg);
  const bool skipped = s->found_inf != 0;
  if (skipped) {
    s->scale *= cfg.backoff_factor;
    s->growth_tracker = 0;
    s->skipped_steps += 1;
  } else {
    s->growth_tracker += 1;
    if (s->growth_tracker >= cfg.growth_interval) {
      s->scale *= cfg.growth_factor;
      s->growth_tracker = 0;
    }
  }
  s->last_step_skipped = skipped ? 1 : 0;
  s->found_inf = 0;
  return skipped;
}

}  // namespace paralab::kernels
