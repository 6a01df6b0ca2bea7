// paralab exec/cuda — element loads and stores by runtime dtype, shared by the backend's own
// kernels (device_ops.cu, fp8_quantize.cu). Conversions are kernels/dtype.hpp's, so a stored
// value rounds exactly as on the CPU backend. Device code only: included by .cu files alone.
#pragma once

#include <cstdint>

#include "exec/cuda/device_ops.hpp"
#include "kernels/dtype.hpp"

namespace paralab::exec::cuda::dev::elem {

// p[i] of storage type t, as float.
__device__ __forceinline__ float load(const void* p, T t, int64_t i) {
  namespace k = paralab::kernels;
  switch (t) {
    case T::f32: return static_cast<const float*>(p)[i];
    case T::bf16: return k::bf16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
    case T::f16: return k::f16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
    case T::fp8: return k::e4m3_bits_to_f32(static_cast<const uint8_t*>(p)[i]);
    case T::i32: return static_cast<float>(static_cast<const int32_t*>(p)[i]);
    case T::u8: return static_cast<float>(static_cast<const uint8_t*>(p)[i]);
  }
  return 0.f;
}

// p[i] = x, rounded to storage type t.
__device__ __forceinline__ void store(void* p, T t, int64_t i, float x) {
  namespace k = paralab::kernels;
  switch (t) {
    case T::f32: static_cast<float*>(p)[i] = x; break;
    case T::bf16: static_cast<uint16_t*>(p)[i] = k::f32_to_bf16_bits(x); break;
    case T::f16: static_cast<uint16_t*>(p)[i] = k::f32_to_f16_bits(x); break;
    case T::fp8: static_cast<uint8_t*>(p)[i] = k::f32_to_e4m3_bits(x); break;
    case T::i32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(x); break;
    case T::u8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(x); break;
  }
}

}  // namespace paralab::exec::cuda::dev::elem
