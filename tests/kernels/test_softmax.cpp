// tests/kernels/test_softmax.cpp — scaled masked softmax CPU twin (Megatron semantics, see
// kernels/softmax.hpp): forward against a double softmax with causal and explicit masks,
// rows sum to one, fully masked rows are zero (never NaN), and backward against central
// finite differences.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/softmax.hpp"
#include "test_util.hpp"

using namespace paralab::kernels;
using namespace paralab::kernels::test;

namespace {

// Double reference: masked keys excluded from the softmax, output 0 there (and on fully
// masked rows).
std::vector<double> softmax_ref(const std::vector<double>& x, const std::vector<uint8_t>* mask,
                                int64_t B, int64_t sq, int64_t sk, int64_t heads, double scale,
                                bool causal) {
  std::vector<double> y(x.size(), 0.0);
  for (int64_t n = 0; n < B; ++n)
    for (int64_t i = 0; i < sq; ++i) {
      const int64_t row = (n * sq + i) * sk;
      auto masked = [&](int64_t j) {
        if (causal && j > i + (sk - sq)) return true;
        return mask && (*mask)[((n / heads) * sq + i) * sk + j] != 0;
      };
      double mx = -INFINITY;
      for (int64_t j = 0; j < sk; ++j)
        if (!masked(j)) mx = std::max(mx, scale * x[row + j]);
      if (mx == -INFINITY) continue;
      double s = 0;
      for (int64_t j = 0; j < sk; ++j)
        if (!masked(j)) s += std::exp(scale * x[row + j] - mx);
      for (int64_t j = 0; j < sk; ++j)
        if (!masked(j)) y[row + j] = std::exp(scale * x[row + j] - mx) / s;
    }
  return y;
}

}  // namespace

TEST_CASE("softmax forward: causal, explicit mask, sq < sk", "[kernels][softmax]") {
  Rng rng(20);
  struct Case { int64_t B, sq, sk, heads; bool causal, use_mask; };
  const Case cases[] = {{1, 1, 1, 1, false, false}, {2, 5, 5, 1, true, false},
                        {4, 3, 7, 2, true, false},  {6, 9, 9, 3, false, true},
                        {4, 8, 130, 2, true, true}, {2, 7, 4, 1, true, false}};
  for (Dtype d : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
    for (const Case& c : cases) {
      CAPTURE(dtype_name(d), c.B, c.sq, c.sk, c.causal, c.use_mask);
      const int64_t n = c.B * c.sq * c.sk;
      auto x = random_tensor(rng, n, d, -8.0, 8.0);
      std::vector<uint8_t> mask((c.B / c.heads) * c.sq * c.sk);
      for (auto& m : mask) m = rng.uniform(0, 1) < 0.3 ? 1 : 0;
      const float scale = 0.37f;
      const auto want = softmax_ref(x.ref, c.use_mask ? &mask : nullptr, c.B, c.sq, c.sk, c.heads,
                                    scale, c.causal);
      Buffer y(n, d);
      scaled_masked_softmax_fwd_cpu({x.buf.data(), y.data(), c.use_mask ? mask.data() : nullptr,
                                     c.B, c.sq, c.sk, c.heads, scale, c.causal, d});
      const auto got = y.f32();
      CHECK_FALSE(any_nan(got));
      CHECK(rel_err(got, want) < tol_for(d));
      // Each row sums to 1, or is all zeros when every key is masked.
      for (int64_t r = 0; r < c.B * c.sq; ++r) {
        double s = 0, sref = 0;
        for (int64_t j = 0; j < c.sk; ++j) {
          s += got[r * c.sk + j];
          sref += want[r * c.sk + j];
        }
        if (sref == 0) CHECK(s == 0.0);
        else CHECK(s == Approx(1.0).epsilon(d == Dtype::f32 ? 1e-5 : 2e-2));
      }
    }
  }
}

TEST_CASE("softmax: fully masked rows are zeros, not NaN", "[kernels][softmax]") {
  // sq > sk with causal: query i sees keys j <= i + (sk - sq); the first sq - sk rows see none.
  const int64_t sq = 6, sk = 3;
  Rng rng(21);
  auto x = rng.floats(sq * sk);
  std::vector<float> y(sq * sk, 42.f);
  scaled_masked_softmax_fwd_cpu({x.data(), y.data(), nullptr, 1, sq, sk, 1, 1.f, true, Dtype::f32});
  for (int64_t i = 0; i < sq - sk; ++i)
    for (int64_t j = 0; j < sk; ++j) CHECK(y[i * sk + j] == 0.f);
  CHECK(y[(sq - sk) * sk] == 1.f);  // first visible row sees exactly one key
  // An all-ones explicit mask.
  std::vector<uint8_t> all(sq * sk, 1);
  scaled_masked_softmax_fwd_cpu({x.data(), y.data(), all.data(), 1, sq, sk, 1, 1.f, false, Dtype::f32});
  for (float v : y) CHECK(v == 0.f);
  // Backward of a zero row is zero.
  std::vector<float> dy = rng.floats(sq * sk), dx(sq * sk, 5.f);
  scaled_masked_softmax_bwd_cpu({dy.data(), y.data(), dx.data(), 1, sq, sk, 1.f, Dtype::f32});
  for (float v : dx) CHECK(v == 0.f);
}

TEST_CASE("softmax backward matches finite differences", "[kernels][softmax]") {
  Rng rng(22);
  for (bool causal : {false, true}) {
    const int64_t B = 2, sq = 4, sk = 6, n = B * sq * sk;
    const float scale = 0.8f;
    auto x = random_tensor(rng, n, Dtype::f32, -3.0, 3.0);
    auto dy = random_tensor(rng, n, Dtype::f32);
    const auto fd = fd_grad(
        [&](const std::vector<double>& v) {
          return dot(dy.ref, softmax_ref(v, nullptr, B, sq, sk, 1, scale, causal));
        },
        x.ref);
    std::vector<float> y(n), dx(n);
    scaled_masked_softmax_fwd_cpu({x.buf.data(), y.data(), nullptr, B, sq, sk, 1, scale, causal, Dtype::f32});
    scaled_masked_softmax_bwd_cpu({dy.buf.data(), y.data(), dx.data(), B, sq, sk, scale, Dtype::f32});
    CHECK(rel_err(dx, fd) < 1e-5);
    // bf16 storage: same math on rounded inputs, one rounding of the result.
    Buffer yb(y, Dtype::bf16), dyb(dy.buf.f32(), Dtype::bf16), dxb(n, Dtype::bf16);
    scaled_masked_softmax_bwd_cpu({dyb.data(), yb.data(), dxb.data(), B, sq, sk, scale, Dtype::bf16});
    CHECK(rel_err(dxb.f32(), fd) < 3e-2);
  }
}
