// kernels/dtype.hpp — storage dtypes of paralab tensors and exact scalar conversions.
//
// Kernels store tensors in f32, bf16 or f16 (fp8 e4m3/e5m2 for casts only) and always compute
// and accumulate in fp32. The conversions below are plain bit manipulation, usable from host
// C++ and (marked __host__ __device__ under nvcc) from CUDA code, so CPU twins and kernels
// round identically:
//   * f32 -> bf16/f16: IEEE 754-2019 roundTiesToEven; overflow rounds to +-Inf as IEEE
//     requires; NaN stays NaN (sign kept, quiet bit set).
//   * f32 -> fp8: OCP 8-bit Floating Point Specification (OFP8) rev 1.0, 2023: e4m3 (bias 7,
//     no Inf, NaN = S.1111.111, max 448) and e5m2 (bias 15, IEEE-like, max 57344).
//     Round to nearest even, saturating ("satfinite", as __NV_SATFINITE in cuda_fp8.h):
//     finite values and +-Inf beyond the max give +-max; NaN gives NaN (0x7F | sign).
//   * narrow -> f32 is exact.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/common.hpp"

#if defined(__CUDACC__)
#define PARALAB_HD __host__ __device__ __forceinline__
#else
#define PARALAB_HD inline
#endif

namespace paralab::kernels {

enum class Dtype : int32_t { f32 = 0, bf16 = 1, f16 = 2, f8e4m3 = 3, f8e5m2 = 4 };

// Bytes per element; 0 for a value outside the enum.
constexpr int64_t dtype_size(Dtype d) {
  switch (d) {
    case Dtype::f32: return 4;
    case Dtype::bf16: return 2;
    case Dtype::f16: return 2;
    case Dtype::f8e4m3: return 1;
    case Dtype::f8e5m2: return 1;
  }
  return 0;
}

constexpr const char* dtype_name(Dtype d) {
  switch (d) {
    case Dtype::f32: return "f32";
    case Dtype::bf16: return "bf16";
    case Dtype::f16: return "f16";
    case Dtype::f8e4m3: return "f8e4m3";
    case Dtype::f8e5m2: return "f8e5m2";
  }
  return "invalid";
}

// Dtypes a compute kernel accepts for activations, params and grads (fp8 is cast-only).
constexpr bool is_float_dtype(Dtype d) {
  return d == Dtype::f32 || d == Dtype::bf16 || d == Dtype::f16;
}
constexpr bool is_any_dtype(Dtype d) { return dtype_size(d) != 0; }

namespace detail {
inline void check_float_dtype(const char* kernel, const char* arg, Dtype d) {
  if (!is_float_dtype(d))
    fail_arg(kernel, arg, std::string(dtype_name(d)) + " (" + std::to_string(int(d)) + ")",
             "unsupported dtype, expected f32, bf16 or f16");
}
inline void check_any_dtype(const char* kernel, const char* arg, Dtype d) {
  if (!is_any_dtype(d))
    fail_arg(kernel, arg, std::to_string(int(d)), "not a Dtype value");
}
}  // namespace detail

// ---- bit casts usable on host and device ----------------------------------------------
PARALAB_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
PARALAB_HD float f32_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// ---- bf16 (1 sign, 8 exponent, 7 mantissa bits: the top half of an f32) ------------------
PARALAB_HD uint16_t f32_to_bf16_bits(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);  // quiet NaN
  // Round to nearest even on bit 16: add 0x7fff plus the lsb of the kept part. A carry out
  // of the mantissa bumps the exponent, which is the correct rounding (up to +-Inf).
  const uint32_t lsb = (u >> 16) & 1u;
  return uint16_t((u + 0x7fffu + lsb) >> 16);
}
PARALAB_HD float bf16_bits_to_f32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }

// ---- f16 (IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits) -----------------
PARALAB_HD uint16_t f32_to_f16_bits(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // quiet NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520 (incl. Inf) -> Inf
  if (a >= 0x38800000u) {                                 // normal: |f| >= 2^-14
    const uint32_t m = a - 0x38000000u;                   // rebias exponent 127 -> 15
    return uint16_t(sign | ((m + 0x0fffu + ((m >> 13) & 1u)) >> 13));
  }
  if (a <= 0x33000000u) return uint16_t(sign);  // |f| <= 2^-25 rounds to (signed) zero
  // Subnormal result k * 2^-24: k = round_even(|f| * 2^24), |f| = mant24 * 2^(e-150).
  const uint32_t e = a >> 23;
  const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;  // in [14, 24]
  uint32_t k = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (k & 1u))) ++k;  // k == 0x400 encodes 2^-14: correct
  return uint16_t(sign | k);
}
PARALAB_HD float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0x1fu) return f32_from_bits(sign | 0x7f800000u | (m << 13));  // Inf / NaN
  if (e == 0u) {
    const float v = float(m) * 5.9604644775390625e-8f;  // m * 2^-24, exact
    return f32_from_bits(f32_bits(v) | sign);
  }
  return f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}

// ---- fp8 (OFP8): generic encoder over (exponent bits, mantissa bits, bias) ----------------
namespace detail {
// kMaxBits: code of the largest finite magnitude; kEmin: exponent of the smallest normal.
template <int kMan, int kBias, uint32_t kMaxBits>
PARALAB_HD uint8_t f32_to_fp8_bits(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint8_t(sign | 0x7fu);  // NaN
  constexpr int kEmin = 1 - kBias;
  // Largest finite value: exponent field kMaxBits>>kMan, mantissa kMaxBits & mask.
  constexpr uint32_t kMaxF32 = (uint32_t((int(kMaxBits >> kMan) - kBias + 127)) << 23) |
                               ((kMaxBits & ((1u << kMan) - 1u)) << (23 - kMan));
  if (a >= kMaxF32) return uint8_t(sign | kMaxBits);  // saturate (and exact max)
  const uint32_t e = a >> 23;
  if (int(e) - 127 >= kEmin) {  // normal range
    const uint32_t m = a - (uint32_t(127 - kBias) << 23);
    constexpr uint32_t kShift = 23 - kMan;
    const uint32_t r = (m + ((1u << (kShift - 1u)) - 1u) + ((m >> kShift) & 1u)) >> kShift;
    return uint8_t(sign | (r > kMaxBits ? kMaxBits : r));
  }
  if (e == 0u) return uint8_t(sign);  // zero or f32 subnormal: far below fp8's range
  // Subnormal: k = round_even(|f| / 2^(kEmin-kMan)), |f| = mant24 * 2^(e-150).
  const int shift = 150 + kEmin - kMan - int(e);
  if (shift > 24) return uint8_t(sign);  // below half the smallest subnormal
  const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  uint32_t k = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (k & 1u))) ++k;
  return uint8_t(sign | k);
}
template <int kMan, int kBias, bool kHasInf>
PARALAB_HD float fp8_bits_to_f32(uint8_t b) {
  const uint32_t sign = uint32_t(b & 0x80u) << 24;
  const uint32_t e = (b & 0x7fu) >> kMan;
  const uint32_t m = b & ((1u << kMan) - 1u);
  constexpr uint32_t kEmax = (1u << (7 - kMan)) - 1u;  // all-ones exponent field
  if (kHasInf && e == kEmax) return f32_from_bits(sign | (m ? 0x7fc00000u : 0x7f800000u));
  if (!kHasInf && (b & 0x7fu) == 0x7fu) return f32_from_bits(sign | 0x7fc00000u);
  if (e == 0u) {  // subnormal: m * 2^(1 - bias - kMan), exact in f32
    const float v = float(m) * f32_from_bits(uint32_t(127 + 1 - kBias - kMan) << 23);
    return f32_from_bits(f32_bits(v) | sign);
  }
  return f32_from_bits(sign | ((e - kBias + 127u) << 23) | (m << (23 - kMan)));
}
}  // namespace detail

PARALAB_HD uint8_t f32_to_e4m3_bits(float f) { return detail::f32_to_fp8_bits<3, 7, 0x7eu>(f); }
PARALAB_HD float e4m3_bits_to_f32(uint8_t b) { return detail::fp8_bits_to_f32<3, 7, false>(b); }
PARALAB_HD uint8_t f32_to_e5m2_bits(float f) { return detail::f32_to_fp8_bits<2, 15, 0x7bu>(f); }
PARALAB_HD float e5m2_bits_to_f32(uint8_t b) { return detail::fp8_bits_to_f32<2, 15, true>(b); }

// ---- storage types for host code (CPU twins, tests, the CPU executor) -------------------
// Trivial 1- or 2-byte wrappers with the same layout as CUDA's __nv_bfloat16 / __half /
// __nv_fp8_*; a `const void*` buffer of Dtype::bf16 can be read as `const bf16_t*`.
struct bf16_t { uint16_t bits; };
struct f16_t { uint16_t bits; };
struct f8e4m3_t { uint8_t bits; };
struct f8e5m2_t { uint8_t bits; };

PARALAB_HD float to_f32(float x) { return x; }
PARALAB_HD float to_f32(bf16_t x) { return bf16_bits_to_f32(x.bits); }
PARALAB_HD float to_f32(f16_t x) { return f16_bits_to_f32(x.bits); }
PARALAB_HD float to_f32(f8e4m3_t x) { return e4m3_bits_to_f32(x.bits); }
PARALAB_HD float to_f32(f8e5m2_t x) { return e5m2_bits_to_f32(x.bits); }

template <class T> PARALAB_HD T from_f32(float x);
template <> PARALAB_HD float from_f32<float>(float x) { return x; }
template <> PARALAB_HD bf16_t from_f32<bf16_t>(float x) { return bf16_t{f32_to_bf16_bits(x)}; }
template <> PARALAB_HD f16_t from_f32<f16_t>(float x) { return f16_t{f32_to_f16_bits(x)}; }
template <> PARALAB_HD f8e4m3_t from_f32<f8e4m3_t>(float x) { return f8e4m3_t{f32_to_e4m3_bits(x)}; }
template <> PARALAB_HD f8e5m2_t from_f32<f8e5m2_t>(float x) { return f8e5m2_t{f32_to_e5m2_bits(x)}; }

// Round an f32 through a dtype and back (what storing then loading does).
inline float round_to(Dtype d, float x) {
  switch (d) {
    case Dtype::f32: return x;
    case Dtype::bf16: return bf16_bits_to_f32(f32_to_bf16_bits(x));
    case Dtype::f16: return f16_bits_to_f32(f32_to_f16_bits(x));
    case Dtype::f8e4m3: return e4m3_bits_to_f32(f32_to_e4m3_bits(x));
    case Dtype::f8e5m2: return e5m2_bits_to_f32(f32_to_e5m2_bits(x));
  }
  return x;
}

}  // namespace paralab::kernels
