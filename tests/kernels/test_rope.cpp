// tests/kernels/test_rope.cpp — rotary embeddings (Su et al. 2021, rotate-half layout):
// forward against the double formula at large positions, partial rotary, [s, b] row order
// and position offsets; backward is the adjoint (checked by <R x, y> = <x, R^T y>) and the
// inverse (R^T R x = x); norms are preserved.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/rope.hpp"
#include "test_util.hpp"

using namespace paralab::kernels;
using namespace paralab::kernels::test;

namespace {

std::vector<double> rope_ref(const std::vector<double>& x, int64_t rows, int64_t heads, int64_t hd,
                             int64_t rot, int64_t batch, int64_t pos0, double base) {
  std::vector<double> y = x;
  const int64_t half = rot / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const double pos = double(r / batch + pos0);
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t o = (r * heads + h) * hd;
      for (int64_t i = 0; i < half; ++i) {
        const double th = pos * std::pow(base, -2.0 * double(i) / double(rot));
        const double x1 = x[o + i], x2 = x[o + i + half];
        y[o + i] = x1 * std::cos(th) - x2 * std::sin(th);
        y[o + i + half] = x2 * std::cos(th) + x1 * std::sin(th);
      }
    }
  }
  return y;
}

}  // namespace

TEST_CASE("rope forward matches the double formula", "[kernels][rope]") {
  Rng rng(40);
  struct Case { int64_t rows, heads, hd, rot, batch, pos0; };
  const Case cases[] = {{1, 1, 2, 0, 1, 0},     {6, 3, 8, 0, 2, 0},
                        {12, 2, 64, 0, 3, 4000}, {5, 4, 80, 32, 1, 7},
                        {9, 1, 128, 0, 1, 8183}};
  for (Dtype d : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
    for (const Case& c : cases) {
      CAPTURE(dtype_name(d), c.rows, c.heads, c.hd, c.rot, c.batch, c.pos0);
      const int64_t n = c.rows * c.heads * c.hd;
      auto x = random_tensor(rng, n, d);
      const int64_t rot = c.rot ? c.rot : c.hd;
      const auto want = rope_ref(x.ref, c.rows, c.heads, c.hd, rot, c.batch, c.pos0, 10000.0);
      Buffer y(n, d);
      RopeArgs a{x.buf.data(), y.data(), c.rows, c.heads, c.hd, c.rot, c.batch, c.pos0, 10000.0, d};
      rope_fwd_cpu(a);
      CHECK(rel_err(y.f32(), want) < tol_for(d));
      // Partial rotary leaves the tail untouched (bit-exact).
      for (int64_t r = 0; r < c.rows * c.heads; ++r)
        for (int64_t j = rot; j < c.hd; ++j) REQUIRE(y.get(r * c.hd + j) == x.buf.get(r * c.hd + j));
    }
  }
}

TEST_CASE("rope backward is the adjoint and the inverse of forward", "[kernels][rope]") {
  Rng rng(41);
  const int64_t rows = 10, heads = 3, hd = 16, n = rows * heads * hd;
  auto x = random_tensor(rng, n, Dtype::f32);
  auto w = random_tensor(rng, n, Dtype::f32);
  std::vector<float> rx(n), rtw(n), back(n);
  RopeArgs fwd{x.buf.data(), rx.data(), rows, heads, hd, 0, 2, 100, 500000.0, Dtype::f32};
  rope_fwd_cpu(fwd);
  RopeArgs bwd{w.buf.data(), rtw.data(), rows, heads, hd, 0, 2, 100, 500000.0, Dtype::f32};
  rope_bwd_cpu(bwd);
  // <R x, w> = <x, R^T w>: backward returns d(sum w * R x)/dx.
  double lhs = 0, rhs = 0;
  for (int64_t i = 0; i < n; ++i) {
    lhs += double(rx[i]) * w.ref[i];
    rhs += x.ref[i] * double(rtw[i]);
  }
  CHECK(lhs == Approx(rhs).epsilon(1e-5));
  // R^T R x = x, and rotation preserves each pair's norm.
  RopeArgs inv{rx.data(), back.data(), rows, heads, hd, 0, 2, 100, 500000.0, Dtype::f32};
  rope_bwd_cpu(inv);
  CHECK(rel_err(back, x.ref) < 1e-5);
  double nx = 0, nr = 0;
  for (int64_t i = 0; i < n; ++i) {
    nx += x.ref[i] * x.ref[i];
    nr += double(rx[i]) * rx[i];
  }
  CHECK(nr == Approx(nx).epsilon(1e-5));
  // In place gives the same bits.
  std::vector<float> xy = x.buf.f32();
  RopeArgs ip{xy.data(), xy.data(), rows, heads, hd, 0, 2, 100, 500000.0, Dtype::f32};
  rope_fwd_cpu(ip);
  CHECK(xy == rx);
}

TEST_CASE("rope at position 0 is the identity", "[kernels][rope]") {
  Rng rng(42);
  const int64_t batch = 4, heads = 2, hd = 32, n = batch * heads * hd;
  auto x = rng.floats(n);
  std::vector<float> y(n);
  rope_fwd_cpu({x.data(), y.data(), batch, heads, hd, 0, batch, 0, 10000.0, Dtype::f32});
  CHECK(y == x);  // all rows are position 0: cos = 1, sin = 0
}
