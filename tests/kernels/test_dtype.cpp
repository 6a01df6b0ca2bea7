// tests/kernels/test_dtype.cpp — storage dtype conversions (kernels/dtype.hpp) and the cast
// kernel: exact round-to-nearest-even on known bit patterns (IEEE 754-2019 Sec. 4.3.1),
// overflow/NaN/Inf/subnormal handling, exhaustive round trips, random values against an
// independent nearest-value oracle, and OCP OFP8 (rev 1.0) e4m3/e5m2 encodings.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cast.hpp"
#include "kernels/dtype.hpp"
#include "test_util.hpp"

using namespace paralab::kernels;
using paralab::kernels::test::Rng;

namespace {

float f_of(uint32_t u) { return f32_from_bits(u); }

// Oracle: nearest value among a table of (value, code) pairs, ties to the even code; values
// beyond the largest finite one go to `overflow_code`. Written independently of dtype.hpp:
// it only uses the decoders (checked separately on known codes) and double comparisons.
struct Nearest {
  std::vector<std::pair<double, uint32_t>> table;  // finite non-negative values, sorted
  uint32_t overflow_code;                          // code for |x| past max (Inf or max)
  double overflow_threshold;                       // |x| >= this overflows (RNE boundary)
  uint32_t sign_bit;
  uint32_t encode(float x) const {
    const double a = std::fabs(double(x));
    const uint32_t s = std::signbit(x) ? sign_bit : 0;
    if (a >= overflow_threshold) return s | overflow_code;
    auto it = std::lower_bound(table.begin(), table.end(), std::make_pair(a, 0u));
    if (it == table.end()) return s | table.back().second;
    if (it == table.begin()) return s | it->second;
    const auto hi = *it, lo = *(it - 1);
    const double dl = a - lo.first, dh = hi.first - a;
    if (dl < dh) return s | lo.second;
    if (dh < dl) return s | hi.second;
    return s | ((lo.second & 1u) == 0 ? lo.second : hi.second);
  }
};

template <class Decode>
Nearest make_oracle(int code_bits, Decode decode, uint32_t overflow_code, double overflow_at) {
  Nearest n{{}, overflow_code, overflow_at, 1u << (code_bits - 1)};
  for (uint32_t c = 0; c < (1u << (code_bits - 1)); ++c) {  // non-negative codes
    const float v = decode(c);
    if (std::isfinite(v)) n.table.emplace_back(double(v), c);
  }
  std::sort(n.table.begin(), n.table.end());
  return n;
}

}  // namespace

TEST_CASE("bf16 rounding on known bit patterns", "[kernels][dtype]") {
  CHECK(f32_to_bf16_bits(1.0f) == 0x3F80);
  CHECK(f32_to_bf16_bits(-2.0f) == 0xC000);
  CHECK(f32_to_bf16_bits(f_of(0x3F808000u)) == 0x3F80);  // tie, kept lsb even: down
  CHECK(f32_to_bf16_bits(f_of(0x3F818000u)) == 0x3F82);  // tie, kept lsb odd: up to even
  CHECK(f32_to_bf16_bits(f_of(0x3F808001u)) == 0x3F81);  // just above the tie: up
  CHECK(f32_to_bf16_bits(f_of(0x3F807FFFu)) == 0x3F80);  // just below: down
  CHECK(f32_to_bf16_bits(f_of(0x7F7FFFFFu)) == 0x7F80);  // FLT_MAX rounds up to +Inf
  CHECK(f32_to_bf16_bits(f_of(0x7F7F7FFFu)) == 0x7F7F);  // stays finite
  CHECK(f32_to_bf16_bits(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(f32_to_bf16_bits(-std::numeric_limits<float>::infinity()) == 0xFF80);
  CHECK(f32_to_bf16_bits(-0.0f) == 0x8000);
  CHECK(f32_to_bf16_bits(f_of(0x00008000u)) == 0x0000);  // subnormal tie -> even (0)
  CHECK(f32_to_bf16_bits(f_of(0x00018000u)) == 0x0002);  // subnormal tie -> even (2)
  // NaN stays NaN (including a signalling NaN whose payload sits in the dropped bits).
  for (uint32_t nan : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0x7FA00000u}) {
    const uint16_t b = f32_to_bf16_bits(f_of(nan));
    CHECK((b & 0x7F80) == 0x7F80);
    CHECK((b & 0x007F) != 0);
    CHECK((b & 0x8000) == ((nan >> 16) & 0x8000));
  }
  CHECK(bf16_bits_to_f32(0x3F80) == 1.0f);
  CHECK(bf16_bits_to_f32(0x0001) == f_of(0x00010000u));
}

TEST_CASE("f16 rounding on known bit patterns", "[kernels][dtype]") {
  CHECK(f32_to_f16_bits(1.0f) == 0x3C00);
  CHECK(f32_to_f16_bits(-1.5f) == 0xBE00);
  CHECK(f32_to_f16_bits(0.1f) == 0x2E66);
  CHECK(f32_to_f16_bits(65504.f) == 0x7BFF);         // largest finite
  CHECK(f32_to_f16_bits(65519.99f) == 0x7BFF);       // below the rounding boundary
  CHECK(f32_to_f16_bits(65520.f) == 0x7C00);         // tie with odd max -> Inf
  CHECK(f32_to_f16_bits(1e10f) == 0x7C00);
  CHECK(f32_to_f16_bits(-1e10f) == 0xFC00);
  CHECK(f32_to_f16_bits(1.f + std::ldexp(1.f, -11)) == 0x3C00);      // tie -> even
  CHECK(f32_to_f16_bits(1.f + 3 * std::ldexp(1.f, -11)) == 0x3C02);  // tie -> even (up)
  CHECK(f32_to_f16_bits(std::ldexp(1.f, -14)) == 0x0400);            // smallest normal
  CHECK(f32_to_f16_bits(std::ldexp(1.f, -24)) == 0x0001);            // smallest subnormal
  CHECK(f32_to_f16_bits(std::ldexp(1.f, -25)) == 0x0000);            // tie with 0 -> 0
  CHECK(f32_to_f16_bits(1.5f * std::ldexp(1.f, -25)) == 0x0001);
  CHECK(f32_to_f16_bits(3.f * std::ldexp(1.f, -25)) == 0x0002);      // 1.5 ulp tie -> even
  CHECK(f32_to_f16_bits(std::ldexp(1023.f, -24)) == 0x03FF);         // largest subnormal
  CHECK(f32_to_f16_bits(std::ldexp(1023.5f, -24)) == 0x0400);        // rounds into normal
  CHECK(f32_to_f16_bits(-0.0f) == 0x8000);
  CHECK(f32_to_f16_bits(f_of(0x00000001u)) == 0x0000);               // f32 subnormal -> 0
  CHECK(f32_to_f16_bits(std::numeric_limits<float>::infinity()) == 0x7C00);
  const uint16_t qn = f32_to_f16_bits(std::numeric_limits<float>::quiet_NaN());
  CHECK((qn & 0x7C00) == 0x7C00);
  CHECK((qn & 0x03FF) != 0);
  CHECK((f32_to_f16_bits(f_of(0x7F800001u)) & 0x03FF) != 0);  // sNaN with low payload
  CHECK(f16_bits_to_f32(0x0001) == std::ldexp(1.f, -24));
  CHECK(f16_bits_to_f32(0x7BFF) == 65504.f);
  CHECK(std::isinf(f16_bits_to_f32(0xFC00)));
  CHECK(std::isnan(f16_bits_to_f32(0x7E00)));
}

TEST_CASE("bf16 and f16 round trip every 16-bit pattern", "[kernels][dtype]") {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float fb = bf16_bits_to_f32(uint16_t(b));
    const float fh = f16_bits_to_f32(uint16_t(b));
    if (std::isnan(fb)) {
      REQUIRE(std::isnan(bf16_bits_to_f32(f32_to_bf16_bits(fb))));
    } else {
      REQUIRE(f32_to_bf16_bits(fb) == b);
    }
    if (std::isnan(fh)) {
      REQUIRE(std::isnan(f16_bits_to_f32(f32_to_f16_bits(fh))));
    } else {
      REQUIRE(f32_to_f16_bits(fh) == b);
    }
  }
}

TEST_CASE("bf16/f16 rounding of random floats matches a nearest-value oracle", "[kernels][dtype]") {
  // f16 overflows at 65520 (the midpoint between 65504 and 2^16, tie to even = Inf);
  // bf16 at the midpoint between its max (0x7F7F) and 2^128.
  const Nearest h = make_oracle(16, [](uint32_t c) { return f16_bits_to_f32(uint16_t(c)); },
                                0x7C00, 65520.0);
  const Nearest b = make_oracle(16, [](uint32_t c) { return bf16_bits_to_f32(uint16_t(c)); },
                                0x7F80, (double(bf16_bits_to_f32(0x7F7F)) + std::ldexp(1.0, 128)) / 2);
  Rng rng(7);
  for (int i = 0; i < 200000; ++i) {
    // Random bit patterns cover every exponent, plus values near f16's range and ties.
    float x = f_of(uint32_t(rng.bits()));
    if (std::isnan(x)) continue;
    if (i % 3 == 1) x = float(rng.uniform(-70000.0, 70000.0));
    if (i % 3 == 2) x = std::ldexp(float(rng.integer(0, 1 << 12)) * 0.5f, int(rng.integer(-30, 5)));
    REQUIRE(f32_to_f16_bits(x) == h.encode(x));
    REQUIRE(f32_to_bf16_bits(x) == b.encode(x));
  }
}

TEST_CASE("fp8 e4m3 and e5m2 follow OFP8 with saturation", "[kernels][dtype]") {
  // Known codes (OCP OFP8 spec Table 1/2).
  CHECK(e4m3_bits_to_f32(0x7E) == 448.f);
  CHECK(e4m3_bits_to_f32(0x08) == std::ldexp(1.f, -6));
  CHECK(e4m3_bits_to_f32(0x01) == std::ldexp(1.f, -9));
  CHECK(e4m3_bits_to_f32(0x38) == 1.f);
  CHECK(std::isnan(e4m3_bits_to_f32(0x7F)));
  CHECK(std::isnan(e4m3_bits_to_f32(0xFF)));
  CHECK(e4m3_bits_to_f32(0x78) == 256.f);  // exponent 15 is finite in e4m3
  CHECK(e5m2_bits_to_f32(0x7B) == 57344.f);
  CHECK(std::isinf(e5m2_bits_to_f32(0x7C)));
  CHECK(std::isnan(e5m2_bits_to_f32(0x7D)));
  CHECK(e5m2_bits_to_f32(0x01) == std::ldexp(1.f, -16));
  CHECK(e5m2_bits_to_f32(0x3C) == 1.f);
  // Saturation and NaN.
  CHECK(f32_to_e4m3_bits(1e6f) == 0x7E);
  CHECK(f32_to_e4m3_bits(-1e6f) == 0xFE);
  CHECK(f32_to_e4m3_bits(std::numeric_limits<float>::infinity()) == 0x7E);
  CHECK(f32_to_e5m2_bits(std::numeric_limits<float>::infinity()) == 0x7B);
  CHECK(f32_to_e4m3_bits(std::numeric_limits<float>::quiet_NaN()) == 0x7F);
  CHECK(f32_to_e5m2_bits(-std::numeric_limits<float>::quiet_NaN()) == 0xFF);
  CHECK(f32_to_e4m3_bits(std::ldexp(1.f, -10)) == 0x00);        // half the min subnormal: tie -> 0
  CHECK(f32_to_e4m3_bits(1.5f * std::ldexp(1.f, -10)) == 0x01);
  // Every non-NaN code round-trips.
  for (uint32_t c = 0; c < 256; ++c) {
    const float a = e4m3_bits_to_f32(uint8_t(c)), b = e5m2_bits_to_f32(uint8_t(c));
    if (!std::isnan(a)) REQUIRE(f32_to_e4m3_bits(a) == c);
    if (!std::isnan(b) && !std::isinf(b)) REQUIRE(f32_to_e5m2_bits(b) == c);
  }
  // Random values against the oracle; everything past max saturates (threshold = max).
  const Nearest o43 = make_oracle(8, [](uint32_t c) { return e4m3_bits_to_f32(uint8_t(c)); },
                                  0x7E, 448.0);
  const Nearest o52 = make_oracle(8, [](uint32_t c) { return e5m2_bits_to_f32(uint8_t(c)); },
                                  0x7B, 57344.0);
  Rng rng(11);
  for (int i = 0; i < 100000; ++i) {
    const float x = std::ldexp(float(rng.uniform(-1.0, 1.0)), int(rng.integer(-20, 18)));
    REQUIRE(f32_to_e4m3_bits(x) == o43.encode(x));
    REQUIRE(f32_to_e5m2_bits(x) == o52.encode(x));
  }
}

TEST_CASE("cast kernel converts between every dtype pair", "[kernels][dtype][cast]") {
  const Dtype all[] = {Dtype::f32, Dtype::bf16, Dtype::f16, Dtype::f8e4m3, Dtype::f8e5m2};
  Rng rng(3);
  for (int64_t n : {1, 7, 1000}) {
    const auto src_vals = rng.floats(n, -300.0, 300.0);
    for (Dtype sd : all) {
      const test::Buffer src(src_vals, sd);
      for (Dtype dd : all) {
        test::Buffer dst(n, dd);
        cast_cpu(CastArgs{src.data(), sd, dst.data(), dd, n});
        for (int64_t i = 0; i < n; ++i) {
          // Expected: decode the source, round once into the destination.
          const float want = round_to(dd, src.get(i));
          REQUIRE(dst.get(i) == want);
        }
      }
    }
  }
}
