// tests/kernels/test_activations.cpp — bias+GELU (tanh form, Hendrycks & Gimpel 2016) and
// SwiGLU (Shazeer 2020) CPU twins: forward against double formulas, backward against
// central finite differences in double, bias grads, all dtypes.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/gelu.hpp"
#include "kernels/swiglu.hpp"
#include "test_util.hpp"

using namespace paralab::kernels;
using namespace paralab::kernels::test;

namespace {

// GELU tanh approximation (Hendrycks & Gimpel 2016, Sec. 2), constants in double.
double gelu_ref(double u) {
  const double k0 = std::sqrt(2.0 / M_PI);
  return 0.5 * u * (1 + std::tanh(k0 * (u + 0.044715 * u * u * u)));
}
double silu_ref(double a) { return a / (1 + std::exp(-a)); }

const Dtype kDtypes[] = {Dtype::f32, Dtype::bf16, Dtype::f16};

}  // namespace

TEST_CASE("gelu forward matches the double formula, with and without bias", "[kernels][gelu]") {
  Rng rng(10);
  for (Dtype d : kDtypes) {
    for (auto [R, C] : {std::pair<int64_t, int64_t>{1, 1}, {4, 37}, {64, 515}}) {
      for (bool with_bias : {false, true}) {
        CAPTURE(dtype_name(d), R, C, with_bias);
        auto x = random_tensor(rng, R * C, d, -5.0, 5.0);
        auto b = random_tensor(rng, C, d, -1.0, 1.0);
        std::vector<double> want(R * C);
        for (int64_t i = 0; i < R * C; ++i) want[i] = gelu_ref(x.ref[i] + (with_bias ? b.ref[i % C] : 0.0));
        Buffer y(R * C, d);
        gelu_fwd_cpu({x.buf.data(), with_bias ? b.buf.data() : nullptr, y.data(), R, C, d});
        CHECK(rel_err(y.f32(), want) < tol_for(d));
      }
    }
  }
}

TEST_CASE("gelu backward matches finite differences, bias grad sums rows", "[kernels][gelu]") {
  Rng rng(11);
  for (Dtype d : kDtypes) {
    const int64_t R = 6, C = 29, n = R * C;
    CAPTURE(dtype_name(d));
    auto x = random_tensor(rng, n, d, -4.0, 4.0);
    auto b = random_tensor(rng, C, d, -1.0, 1.0);
    auto dy = random_tensor(rng, n, d);
    auto L = [&](const std::vector<double>& xx, const std::vector<double>& bb) {
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += dy.ref[i] * gelu_ref(xx[i] + bb[i % C]);
      return s;
    };
    const auto dx_fd = fd_grad([&](const std::vector<double>& v) { return L(v, b.ref); }, x.ref);
    const auto db_fd = fd_grad([&](const std::vector<double>& v) { return L(x.ref, v); }, b.ref);
    Buffer dx(n, d);
    std::vector<float> db(C, 3.f);
    gelu_bwd_cpu({dy.buf.data(), x.buf.data(), b.buf.data(), dx.data(), db.data(), false, R, C, d});
    CHECK(rel_err(dx.f32(), dx_fd) < (d == Dtype::f32 ? 1e-5 : tol_for(d)));
    CHECK(rel_err(db, db_fd) < 1e-5);
    // Accumulation and in-place (dx aliases dy).
    Buffer dydx = dy.buf;
    std::vector<float> db2(C, 1.f);
    gelu_bwd_cpu({dydx.data(), x.buf.data(), b.buf.data(), dydx.data(), db2.data(), true, R, C, d});
    CHECK(dydx.raw() == dx.raw());
    for (int64_t c = 0; c < C; ++c) CHECK(db2[c] == Approx(db[c] + 1.f).margin(1e-5));
  }
}

TEST_CASE("swiglu forward matches silu(gate) * up", "[kernels][swiglu]") {
  Rng rng(12);
  for (Dtype d : kDtypes) {
    for (auto [R, F] : {std::pair<int64_t, int64_t>{1, 1}, {3, 17}, {40, 300}}) {
      CAPTURE(dtype_name(d), R, F);
      auto x = random_tensor(rng, R * 2 * F, d, -6.0, 6.0);
      std::vector<double> want(R * F);
      for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < F; ++c)
          want[r * F + c] = silu_ref(x.ref[r * 2 * F + c]) * x.ref[r * 2 * F + F + c];
      Buffer y(R * F, d);
      swiglu_fwd_cpu({x.buf.data(), y.data(), R, F, d});
      CHECK(rel_err(y.f32(), want) < tol_for(d));
    }
  }
}

TEST_CASE("swiglu backward matches finite differences", "[kernels][swiglu]") {
  Rng rng(13);
  for (Dtype d : kDtypes) {
    const int64_t R = 5, F = 13;
    CAPTURE(dtype_name(d));
    auto x = random_tensor(rng, R * 2 * F, d, -5.0, 5.0);
    auto dy = random_tensor(rng, R * F, d);
    const auto fd = fd_grad(
        [&](const std::vector<double>& v) {
          double s = 0;
          for (int64_t r = 0; r < R; ++r)
            for (int64_t c = 0; c < F; ++c)
              s += dy.ref[r * F + c] * silu_ref(v[r * 2 * F + c]) * v[r * 2 * F + F + c];
          return s;
        },
        x.ref);
    Buffer dx(R * 2 * F, d);
    swiglu_bwd_cpu({dy.buf.data(), x.buf.data(), dx.data(), R, F, d});
    CHECK(rel_err(dx.f32(), fd) < (d == Dtype::f32 ? 1e-5 : tol_for(d)));
  }
}

TEST_CASE("silu saturates without NaN for large |x|", "[kernels][swiglu]") {
  const std::vector<float> vals = {-1000.f, -100.f, -88.5f, 88.5f, 100.f, 1000.f};
  const int64_t F = int64_t(vals.size());
  std::vector<float> x(2 * F, 1.f);
  for (int64_t c = 0; c < F; ++c) x[c] = vals[c];
  std::vector<float> y(F), dy(F, 1.f), dx(2 * F);
  swiglu_fwd_cpu({x.data(), y.data(), 1, F, Dtype::f32});
  swiglu_bwd_cpu({dy.data(), x.data(), dx.data(), 1, F, Dtype::f32});
  CHECK_FALSE(any_nan(y));
  CHECK_FALSE(any_nan(dx));
  CHECK(y[0] == Approx(0.0).margin(1e-30));
  CHECK(y[5] == Approx(1000.0));
}
