// kernels/layernorm_cpu.cpp — CPU twin of LayerNorm (formulas and shapes: layernorm.hpp).
// One row at a time: widen to fp32 in a scratch row, two-pass mean/variance (no
// E[x^2]-E[x]^2 cancellation), then normalize; loops are simple so they vectorize.
#include <cmath>
#include <vector>

#include "kernels/cpu_util.hpp"
#include "kernels/layernorm.hpp"

namespace paralab::kernels {
namespace {
constexpr const char* kFwd = "layernorm_fwd";
constexpr const char* kBwd = "layernorm_bwd";
}  // namespace

void layernorm_fwd_check(const LayerNormFwdArgs& a) {
  detail::check_positive(kFwd, "rows", a.rows);
  detail::check_positive(kFwd, "cols", a.cols);
  detail::check_float_dtype(kFwd, "dtype", a.dtype);
  detail::check_ptr(kFwd, "x", a.x);
  detail::check_ptr(kFwd, "gamma", a.gamma);
  detail::check_ptr(kFwd, "y", a.y);
  if (!(a.eps > 0.f) || !std::isfinite(a.eps))
    detail::fail_arg(kFwd, "eps", std::to_string(a.eps), "must be finite and > 0");
}

void layernorm_bwd_check(const LayerNormBwdArgs& a) {
  detail::check_positive(kBwd, "rows", a.rows);
  detail::check_positive(kBwd, "cols", a.cols);
  detail::check_float_dtype(kBwd, "dtype", a.dtype);
  detail::check_ptr(kBwd, "dy", a.dy);
  detail::check_ptr(kBwd, "x", a.x);
  detail::check_ptr(kBwd, "gamma", a.gamma);
  detail::check_ptr(kBwd, "mean", a.mean);
  detail::check_ptr(kBwd, "rstd", a.rstd);
  detail::check_ptr(kBwd, "dx", a.dx);
}

void layernorm_fwd_cpu(const LayerNormFwdArgs& a) {
  layernorm_fwd_check(a);
  cpu::dispatch_float(a.dtype, kFwd, "dtype", [&](auto tag) {
    using T = decltype(tag);
    const int64_t C = a.cols;
    std::vector<float> row(C), gamma(C), beta(C, 0.f);
    cpu::load_row(cpu::as<T>(a.gamma), C, gamma.data());
    if (a.beta) cpu::load_row(cpu::as<T>(a.beta), C, beta.data());
    const T* x = cpu::as<T>(a.x);
    T* y = cpu::as<T>(a.y);
    const float inv_c = 1.f / float(C);
    for (int64_t r = 0; r < a.rows; ++r) {
      float* v = row.data();
      cpu::load_row(x + r * C, C, v);
      const float mean = cpu::sum8(v, C) * inv_c;
      for (int64_t c = 0; c < C; ++c) v[c] -= mean;
      const float var = cpu::dot8(v, v, C) * inv_c;
      const float rstd = 1.f / std::sqrt(var + a.eps);
      for (int64_t c = 0; c < C; ++c) v[c] = v[c] * rstd * gamma[c] + beta[c];
      cpu::store_row(v, C, y + r * C);
      if (a.mean) a.mean[r] = mean;
      if (a.rstd) a.rstd[r] = rstd;
    }
  });
}

void layernorm_bwd_cpu(const LayerNormBwdArgs& a) {
  layernorm_bwd_check(a);
  cpu::dispatch_float(a.dtype, kBwd, "dtype", [&](auto tag) {
    using T = decltype(tag);
    const int64_t C = a.cols;
    std::vector<float> dy(C), xhat(C), g(C), gamma(C), dg(C, 0.f), db(C, 0.f);
    cpu::load_row(cpu::as<T>(a.gamma), C, gamma.data());
    const T* x = cpu::as<T>(a.x);
    const T* dyp = cpu::as<T>(a.dy);
    T* dx = cpu::as<T>(a.dx);
    const float inv_c = 1.f / float(C);
    for (int64_t r = 0; r < a.rows; ++r) {
      cpu::load_row(dyp + r * C, C, dy.data());
      cpu::load_row(x + r * C, C, xhat.data());
      const float mean = a.mean[r], rstd = a.rstd[r];
      for (int64_t c = 0; c < C; ++c) {
        xhat[c] = (xhat[c] - mean) * rstd;
        g[c] = dy[c] * gamma[c];
        dg[c] += dy[c] * xhat[c];
        db[c] += dy[c];
      }
      const float mg = cpu::sum8(g.data(), C) * inv_c;
      const float mgx = cpu::dot8(g.data(), xhat.data(), C) * inv_c;
      for (int64_t c = 0; c < C; ++c) g[c] = rstd * (g[c] - mg - xhat[c] * mgx);
      cpu::store_row(g.data(), C, dx + r * C);  // after dy's row is read: dx may alias dy
    }
    for (int64_t c = 0; c < C; ++c) {
      if (a.dgamma) a.dgamma[c] = a.accumulate ? a.dgamma[c] + dg[c] : dg[c];
      if (a.dbeta) a.dbeta[c] = a.accumulate ? a.dbeta[c] + db[c] : db[c];
    }
  });
}

}  // namespace paralab::kernels
