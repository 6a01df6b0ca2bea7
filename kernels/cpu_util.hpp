// kernels/cpu_util.hpp — internal helpers of the CPU twins (not part of the public API).
//
// The twins are templates over the storage type T (float, bf16_t, f16_t); `dispatch_float`
// turns a runtime Dtype into that template argument once per call, so the inner loops are
// plain inline loads/stores the compiler can vectorize, with no per-element dispatch.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/common.hpp"
#include "kernels/dtype.hpp"

namespace paralab::kernels::cpu {

// Calls f(T{}) with T the storage type of `d` (f32/bf16/f16), else throws KernelError.
template <class F>
decltype(auto) dispatch_float(Dtype d, const char* kernel, const char* arg, F&& f) {
  switch (d) {
    case Dtype::f32: return f(float{});
    case Dtype::bf16: return f(bf16_t{});
    case Dtype::f16: return f(f16_t{});
    default: break;
  }
  detail::check_float_dtype(kernel, arg, d);  // throws
  return f(float{});                          // unreachable
}

// Same, over every Dtype including fp8 (used by cast).
template <class F>
decltype(auto) dispatch_any(Dtype d, const char* kernel, const char* arg, F&& f) {
  switch (d) {
    case Dtype::f32: return f(float{});
    case Dtype::bf16: return f(bf16_t{});
    case Dtype::f16: return f(f16_t{});
    case Dtype::f8e4m3: return f(f8e4m3_t{});
    case Dtype::f8e5m2: return f(f8e5m2_t{});
  }
  detail::check_any_dtype(kernel, arg, d);  // throws
  return f(float{});
}

template <class T> inline const T* as(const void* p) { return static_cast<const T*>(p); }
template <class T> inline T* as(void* p) { return static_cast<T*>(p); }

// Loads a row of n storage elements into fp32 (the twins compute in fp32).
template <class T>
inline void load_row(const T* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = to_f32(src[i]);
}
template <class T>
inline void store_row(const float* src, int64_t n, T* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = from_f32<T>(src[i]);
}

// Sum of n floats with 8 independent fp32 accumulators: deterministic (fixed order), more
// accurate than one running sum, and vectorizable without -ffast-math.
inline float sum8(const float* x, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += x[i + j];
  for (int j = 0; i < n; ++i, ++j) acc[j] += x[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Sum of x[i]*y[i], same scheme.
inline float dot8(const float* x, const float* y, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += x[i + j] * y[i + j];
  for (int j = 0; i < n; ++i, ++j) acc[j] += x[i] * y[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace paralab::kernels::cpu
