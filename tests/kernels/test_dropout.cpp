// tests/kernels/test_dropout.cpp — the Philox4x32-10 stream (Salmon et al. 2011, checked on
// Random123's known-answer vectors), dropout mask statistics and reproducibility, inverted
// scaling 1/(1-p), p = 0 being exactly a residual add, and the fused bias-dropout-add
// (Megatron-LM) forward/backward.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/dropout.hpp"
#include "kernels/rng.hpp"
#include "test_util.hpp"

using namespace paralab::kernels;
using namespace paralab::kernels::test;

TEST_CASE("philox4x32-10 matches the Random123 known-answer vectors", "[kernels][dropout][rng]") {
  // kat_vectors: "philox4x32 10 <ctr x4> <key x2> <expected x4>".
  const Philox4 a = philox4x32_10(0, 0, 0, 0, 0, 0);
  CHECK(a.v[0] == 0x6627e8d5u);
  CHECK(a.v[1] == 0xe169c58du);
  CHECK(a.v[2] == 0xbc57ac4cu);
  CHECK(a.v[3] == 0x9b00dbd8u);
  const uint32_t f = 0xffffffffu;
  const Philox4 b = philox4x32_10(f, f, f, f, f, f);
  CHECK(b.v[0] == 0x408f276du);
  CHECK(b.v[1] == 0x41c83b0eu);
  CHECK(b.v[2] == 0xa20bc7c6u);
  CHECK(b.v[3] == 0x6d5451fdu);
  const Philox4 c = philox4x32_10(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u,
                                  0xa4093822u, 0x299f31d0u);
  CHECK(c.v[0] == 0xd16cfe09u);
  CHECK(c.v[1] == 0x94fdccebu);
  CHECK(c.v[2] == 0x5001e420u);
  CHECK(c.v[3] == 0x24126ea1u);
}

TEST_CASE("dropout mask: rate, reproducibility, offsets", "[kernels][dropout]") {
  const int64_t n = 200003;  // odd: blocks of 4 do not tile it
  Rng rng(30);
  auto x = rng.floats(n, 0.5, 2.0);  // never zero: a kept element is nonzero
  for (float p : {0.1f, 0.5f, 0.9f}) {
    CAPTURE(p);
    std::vector<float> y(n);
    std::vector<uint8_t> mask(n);
    dropout_fwd_cpu({x.data(), y.data(), mask.data(), n, p, 1234, 0, Dtype::f32});
    // Kept fraction within 5 sigma of 1-p (binomial).
    double kept = 0;
    for (auto m : mask) kept += m;
    const double sigma = std::sqrt(n * p * (1 - p));
    CHECK(std::fabs(kept - n * (1 - p)) < 5 * sigma);
    // Mask agrees with the documented stream: dropped iff word < floor(p * 2^32).
    const uint64_t thr = dropout_threshold(p);
    for (int64_t i = 0; i < n; i += 997)
      CHECK(mask[i] == (uint64_t(dropout_word(1234, uint64_t(i))) >= thr ? 1 : 0));
    // Values: kept = x / (1-p), dropped = 0.
    const float s = dropout_scale(p);
    for (int64_t i = 0; i < n; ++i) {
      if (mask[i]) REQUIRE(y[i] == x[i] * s);
      else REQUIRE(y[i] == 0.f);
    }
    // Same (seed, offset): same mask. Different seed: a different mask.
    std::vector<float> y2(n);
    std::vector<uint8_t> m2(n);
    dropout_fwd_cpu({x.data(), y2.data(), m2.data(), n, p, 1234, 0, Dtype::f32});
    CHECK(m2 == mask);
    dropout_fwd_cpu({x.data(), y2.data(), m2.data(), n, p, 1235, 0, Dtype::f32});
    CHECK(m2 != mask);
    // A call at offset o over a slice sees the same stream positions as the full call.
    for (int64_t o : {1, 2, 3, 4, 5, 4097}) {
      const int64_t m = 1001;
      std::vector<float> ys(m);
      std::vector<uint8_t> ms(m);
      dropout_fwd_cpu({x.data() + o, ys.data(), ms.data(), m, p, 1234, uint64_t(o), Dtype::f32});
      for (int64_t i = 0; i < m; ++i) REQUIRE(ms[i] == mask[o + i]);
    }
  }
}

TEST_CASE("dropout with p = 0 is the identity and p = 1 drops everything", "[kernels][dropout]") {
  Rng rng(31);
  for (Dtype d : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
    const int64_t n = 1023;
    auto x = random_tensor(rng, n, d);
    Buffer y(n, d);
    std::vector<uint8_t> mask(n, 7);
    dropout_fwd_cpu({x.buf.data(), y.data(), mask.data(), n, 0.f, 9, 0, d});
    CHECK(y.raw() == x.buf.raw());
    for (auto m : mask) CHECK(m == 1);
    dropout_fwd_cpu({x.buf.data(), y.data(), mask.data(), n, 1.f, 9, 0, d});
    for (int64_t i = 0; i < n; ++i) CHECK(y.get(i) == 0.f);
    for (auto m : mask) CHECK(m == 0);
  }
}

TEST_CASE("dropout backward applies the stored mask and scale", "[kernels][dropout]") {
  Rng rng(32);
  const int64_t n = 4099;
  const float p = 0.3f;
  auto x = rng.floats(n, 0.5, 1.5);
  auto dy = rng.floats(n);
  std::vector<float> y(n), dx(n);
  std::vector<uint8_t> mask(n);
  dropout_fwd_cpu({x.data(), y.data(), mask.data(), n, p, 77, 12, Dtype::f32});
  dropout_bwd_cpu({dy.data(), mask.data(), dx.data(), n, p, Dtype::f32});
  // dx = d(sum dy*y)/dx: y_i = x_i * m_i * s is linear in x_i, slope m_i * s.
  for (int64_t i = 0; i < n; ++i) REQUIRE(dx[i] == (mask[i] ? dy[i] * dropout_scale(p) : 0.f));
  // p = 0 needs no mask.
  dropout_bwd_cpu({dy.data(), nullptr, dx.data(), n, 0.f, Dtype::f32});
  CHECK(dx == dy);
}

TEST_CASE("bias-dropout-add: forward, p = 0 exactness, backward and bias grad", "[kernels][dropout]") {
  Rng rng(33);
  for (Dtype d : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
    const int64_t R = 37, C = 53, n = R * C;
    CAPTURE(dtype_name(d));
    auto x = random_tensor(rng, n, d);
    auto b = random_tensor(rng, C, d, -0.5, 0.5);
    auto res = random_tensor(rng, n, d);
    // p = 0: out = residual + (x + bias), one rounding from exact fp32 sum.
    Buffer out(n, d);
    dropout_add_fwd_cpu({x.buf.data(), b.buf.data(), res.buf.data(), out.data(), nullptr, R, C,
                         0.f, 5, 0, d});
    for (int64_t i = 0; i < n; ++i)
      REQUIRE(out.get(i) == round_to(d, float(res.ref[i]) + (float(x.ref[i]) + float(b.ref[i % C]))));
    // p > 0: matches plain dropout of (x + b) plus residual, same stream positions.
    const float p = 0.25f;
    const uint64_t seed = 99, offset = 1001;
    std::vector<uint8_t> mask(n);
    dropout_add_fwd_cpu({x.buf.data(), b.buf.data(), res.buf.data(), out.data(), mask.data(), R,
                         C, p, seed, offset, d});
    const float s = dropout_scale(p);
    const uint64_t thr = dropout_threshold(p);
    for (int64_t i = 0; i < n; ++i) {
      const bool keep = dropout_word(seed, offset + uint64_t(i)) >= thr;
      REQUIRE(mask[i] == (keep ? 1 : 0));
      const double want = res.ref[i] + (keep ? (x.ref[i] + b.ref[i % C]) * s : 0.0);
      REQUIRE(out.get(i) == Approx(want).epsilon(tol_for(d)).margin(tol_for(d)));
    }
    // Backward: dx = dout * mask * s; dbias = column sums of dx (fp32, before rounding).
    auto dout = random_tensor(rng, n, d);
    Buffer dx(n, d);
    std::vector<float> db(C, 2.f);
    dropout_add_bwd_cpu({dout.buf.data(), mask.data(), dx.data(), db.data(), false, R, C, p, d});
    std::vector<double> db_ref(C, 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const double v = mask[i] ? dout.ref[i] * s : 0.0;
      db_ref[i % C] += v;
      REQUIRE(dx.get(i) == round_to(d, mask[i] ? float(dout.ref[i]) * s : 0.f));
    }
    CHECK(rel_err(db, db_ref) < 1e-5);
  }
}
