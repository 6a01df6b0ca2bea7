// tests/kernels/test_norms.cpp — LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich
// 2019) CPU twins: forward against a double-precision formula, backward against central
// finite differences of that formula (small shapes) and against the closed-form gradient
// in double (larger shapes), in f32/bf16/f16, including accumulation and in-place use.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/layernorm.hpp"
#include "kernels/rmsnorm.hpp"
#include "test_util.hpp"

using namespace paralab::kernels;
using namespace paralab::kernels::test;

namespace {

// y = (x - mean)/sqrt(var + eps) * g + b per row (Ba et al. 2016, Eq. 4).
std::vector<double> ln_ref(const std::vector<double>& x, const std::vector<double>& g,
                           const std::vector<double>& b, int64_t R, int64_t C, double eps,
                           std::vector<double>* mean = nullptr, std::vector<double>* rstd = nullptr) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < R; ++r) {
    double mu = 0, var = 0;
    for (int64_t c = 0; c < C; ++c) mu += x[r * C + c];
    mu /= double(C);
    for (int64_t c = 0; c < C; ++c) var += (x[r * C + c] - mu) * (x[r * C + c] - mu);
    var /= double(C);
    const double rs = 1 / std::sqrt(var + eps);
    for (int64_t c = 0; c < C; ++c) y[r * C + c] = (x[r * C + c] - mu) * rs * g[c] + b[c];
    if (mean) (*mean)[r] = mu;
    if (rstd) (*rstd)[r] = rs;
  }
  return y;
}

// y = x / sqrt(mean(x^2) + eps) * g (Zhang & Sennrich 2019, Eq. 4).
std::vector<double> rms_ref(const std::vector<double>& x, const std::vector<double>& g, int64_t R,
                            int64_t C, double eps, std::vector<double>* rr = nullptr) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < R; ++r) {
    double ms = 0;
    for (int64_t c = 0; c < C; ++c) ms += x[r * C + c] * x[r * C + c];
    const double k = 1 / std::sqrt(ms / double(C) + eps);
    for (int64_t c = 0; c < C; ++c) y[r * C + c] = x[r * C + c] * k * g[c];
    if (rr) (*rr)[r] = k;
  }
  return y;
}

const Dtype kDtypes[] = {Dtype::f32, Dtype::bf16, Dtype::f16};
struct Shape { int64_t rows, cols; };

}  // namespace

TEST_CASE("layernorm forward matches the double formula", "[kernels][layernorm]") {
  Rng rng(1);
  for (Dtype d : kDtypes) {
    for (Shape s : {Shape{1, 1}, Shape{3, 7}, Shape{5, 64}, Shape{33, 1000}}) {
      CAPTURE(dtype_name(d), s.rows, s.cols);
      // Offset mean (3.0) so a one-pass E[x^2]-E[x]^2 variance would lose digits.
      auto x = random_tensor(rng, s.rows * s.cols, d, 2.0, 4.0);
      auto g = random_tensor(rng, s.cols, d, 0.5, 1.5);
      auto b = random_tensor(rng, s.cols, d, -0.5, 0.5);
      std::vector<double> mu(s.rows), rs(s.rows);
      const auto want = ln_ref(x.ref, g.ref, b.ref, s.rows, s.cols, 1e-5, &mu, &rs);
      Buffer y(s.rows * s.cols, d);
      std::vector<float> mean(s.rows), rstd(s.rows);
      layernorm_fwd_cpu({x.buf.data(), g.buf.data(), b.buf.data(), y.data(), mean.data(),
                         rstd.data(), s.rows, s.cols, 1e-5f, d});
      CHECK(rel_err(y.f32(), want) < tol_for(d));
      CHECK(rel_err(mean, mu) < 1e-6);
      CHECK(rel_err(rstd, rs) < 1e-4);  // 1/sqrt(var+eps) with var ~ 0.3: fp32 rounding
      // In place (y aliases x) gives the same result.
      Buffer xy = x.buf;
      layernorm_fwd_cpu({xy.data(), g.buf.data(), b.buf.data(), xy.data(), nullptr, nullptr,
                         s.rows, s.cols, 1e-5f, d});
      CHECK(xy.raw() == y.raw());
    }
  }
}

TEST_CASE("layernorm without beta is beta = 0", "[kernels][layernorm]") {
  Rng rng(2);
  auto x = random_tensor(rng, 4 * 9, Dtype::f32);
  auto g = random_tensor(rng, 9, Dtype::f32);
  const std::vector<double> zero(9, 0.0);
  Buffer y(36, Dtype::f32);
  layernorm_fwd_cpu({x.buf.data(), g.buf.data(), nullptr, y.data(), nullptr, nullptr, 4, 9, 1e-5f,
                     Dtype::f32});
  CHECK(rel_err(y.f32(), ln_ref(x.ref, g.ref, zero, 4, 9, 1e-5)) < 2e-6);
}

TEST_CASE("layernorm backward matches finite differences", "[kernels][layernorm]") {
  Rng rng(3);
  for (Shape s : {Shape{1, 5}, Shape{3, 7}, Shape{4, 16}}) {
    CAPTURE(s.rows, s.cols);
    const int64_t n = s.rows * s.cols;
    auto x = random_tensor(rng, n, Dtype::f32);
    auto g = random_tensor(rng, s.cols, Dtype::f32, 0.5, 1.5);
    auto b = random_tensor(rng, s.cols, Dtype::f32);
    auto dy = random_tensor(rng, n, Dtype::f32);
    const double eps = 1e-5;
    // L = sum dy * y(x, g, b); its gradients are what backward must return.
    auto L = [&](const std::vector<double>& xx, const std::vector<double>& gg,
                 const std::vector<double>& bb) {
      return dot(dy.ref, ln_ref(xx, gg, bb, s.rows, s.cols, eps));
    };
    const auto dx_fd = fd_grad([&](const std::vector<double>& v) { return L(v, g.ref, b.ref); }, x.ref);
    const auto dg_fd = fd_grad([&](const std::vector<double>& v) { return L(x.ref, v, b.ref); }, g.ref);
    const auto db_fd = fd_grad([&](const std::vector<double>& v) { return L(x.ref, g.ref, v); }, b.ref);

    Buffer y(n, Dtype::f32), dx(n, Dtype::f32);
    std::vector<float> mean(s.rows), rstd(s.rows), dg(s.cols, 7.f), db(s.cols, 7.f);
    layernorm_fwd_cpu({x.buf.data(), g.buf.data(), b.buf.data(), y.data(), mean.data(),
                       rstd.data(), s.rows, s.cols, float(eps), Dtype::f32});
    layernorm_bwd_cpu({dy.buf.data(), x.buf.data(), g.buf.data(), mean.data(), rstd.data(),
                       dx.data(), dg.data(), db.data(), false, s.rows, s.cols, Dtype::f32});
    CHECK(rel_err(dx.f32(), dx_fd) < 1e-4);
    CHECK(rel_err(dg, dg_fd) < 1e-4);
    CHECK(rel_err(db, db_fd) < 1e-4);
    // accumulate = true adds onto the existing param grads (micro-batch accumulation).
    std::vector<float> dg2 = dg, db2 = db;
    layernorm_bwd_cpu({dy.buf.data(), x.buf.data(), g.buf.data(), mean.data(), rstd.data(),
                       dx.data(), dg2.data(), db2.data(), true, s.rows, s.cols, Dtype::f32});
    for (int64_t c = 0; c < s.cols; ++c) {
      CHECK(dg2[c] == Approx(2 * dg_fd[c]).margin(1e-4));
      CHECK(db2[c] == Approx(2 * db_fd[c]).margin(1e-4));
    }
  }
}

TEST_CASE("layernorm backward matches the closed form in every dtype", "[kernels][layernorm]") {
  Rng rng(4);
  for (Dtype d : kDtypes) {
    const int64_t R = 17, C = 300, n = R * C;
    CAPTURE(dtype_name(d));
    auto x = random_tensor(rng, n, d);
    auto g = random_tensor(rng, C, d, 0.5, 1.5);
    auto dy = random_tensor(rng, n, d);
    std::vector<double> mu(R), rs(R);
    ln_ref(x.ref, g.ref, std::vector<double>(C, 0.0), R, C, 1e-5, &mu, &rs);
    // dx = rstd (gd - mean(gd) - xhat mean(gd xhat)), gd = dy g (derivation in layernorm.hpp).
    std::vector<double> dx_ref(n), dg_ref(C, 0), db_ref(C, 0);
    for (int64_t r = 0; r < R; ++r) {
      double m1 = 0, m2 = 0;
      for (int64_t c = 0; c < C; ++c) {
        const double xh = (x.ref[r * C + c] - mu[r]) * rs[r], gd = dy.ref[r * C + c] * g.ref[c];
        m1 += gd;
        m2 += gd * xh;
        dg_ref[c] += dy.ref[r * C + c] * xh;
        db_ref[c] += dy.ref[r * C + c];
      }
      m1 /= C;
      m2 /= C;
      for (int64_t c = 0; c < C; ++c) {
        const double xh = (x.ref[r * C + c] - mu[r]) * rs[r];
        dx_ref[r * C + c] = rs[r] * (dy.ref[r * C + c] * g.ref[c] - m1 - xh * m2);
      }
    }
    Buffer y(n, d), dx(n, d);
    std::vector<float> mean(R), rstd(R), dg(C), db(C);
    layernorm_fwd_cpu({x.buf.data(), g.buf.data(), nullptr, y.data(), mean.data(), rstd.data(), R,
                       C, 1e-5f, d});
    // In place: dx aliases dy.
    Buffer dy_dx = dy.buf;
    layernorm_bwd_cpu({dy_dx.data(), x.buf.data(), g.buf.data(), mean.data(), rstd.data(),
                       dy_dx.data(), dg.data(), db.data(), false, R, C, d});
    CHECK(rel_err(dy_dx.f32(), dx_ref) < tol_for(d));
    CHECK(rel_err(dg, dg_ref) < 1e-4);
    CHECK(rel_err(db, db_ref) < 1e-5);
  }
}

TEST_CASE("rmsnorm forward matches the double formula", "[kernels][rmsnorm]") {
  Rng rng(5);
  for (Dtype d : kDtypes) {
    for (Shape s : {Shape{1, 1}, Shape{3, 7}, Shape{33, 1000}}) {
      CAPTURE(dtype_name(d), s.rows, s.cols);
      auto x = random_tensor(rng, s.rows * s.cols, d);
      auto g = random_tensor(rng, s.cols, d, 0.5, 1.5);
      std::vector<double> rr(s.rows);
      const auto want = rms_ref(x.ref, g.ref, s.rows, s.cols, 1e-6, &rr);
      Buffer y(s.rows * s.cols, d);
      std::vector<float> rrms(s.rows);
      rmsnorm_fwd_cpu({x.buf.data(), g.buf.data(), y.data(), rrms.data(), s.rows, s.cols, 1e-6f, d});
      CHECK(rel_err(y.f32(), want) < tol_for(d));
      CHECK(rel_err(rrms, rr) < 1e-5);
    }
  }
}

TEST_CASE("rmsnorm backward matches finite differences", "[kernels][rmsnorm]") {
  Rng rng(6);
  for (Dtype d : kDtypes) {
    for (Shape s : {Shape{1, 3}, Shape{3, 7}, Shape{5, 40}}) {
      CAPTURE(dtype_name(d), s.rows, s.cols);
      const int64_t n = s.rows * s.cols;
      auto x = random_tensor(rng, n, d);
      auto g = random_tensor(rng, s.cols, d, 0.5, 1.5);
      auto dy = random_tensor(rng, n, d);
      auto L = [&](const std::vector<double>& xx, const std::vector<double>& gg) {
        return dot(dy.ref, rms_ref(xx, gg, s.rows, s.cols, 1e-6));
      };
      const auto dx_fd = fd_grad([&](const std::vector<double>& v) { return L(v, g.ref); }, x.ref);
      const auto dg_fd = fd_grad([&](const std::vector<double>& v) { return L(x.ref, v); }, g.ref);
      Buffer y(n, d), dx(n, d);
      std::vector<float> rrms(s.rows), dg(s.cols, 1.f);
      rmsnorm_fwd_cpu({x.buf.data(), g.buf.data(), y.data(), rrms.data(), s.rows, s.cols, 1e-6f, d});
      rmsnorm_bwd_cpu({dy.buf.data(), x.buf.data(), g.buf.data(), rrms.data(), dx.data(),
                       dg.data(), false, s.rows, s.cols, d});
      CHECK(rel_err(dx.f32(), dx_fd) < (d == Dtype::f32 ? 1e-4 : tol_for(d)));
      CHECK(rel_err(dg, dg_fd) < 1e-4);
      std::vector<float> dg_acc(s.cols, 0.5f);
      rmsnorm_bwd_cpu({dy.buf.data(), x.buf.data(), g.buf.data(), rrms.data(), dx.data(),
                       dg_acc.data(), true, s.rows, s.cols, d});
      for (int64_t c = 0; c < s.cols; ++c) CHECK(dg_acc[c] == Approx(dg[c] + 0.5f).margin(1e-5));
    }
  }
}
