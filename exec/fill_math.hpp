// paralab exec — the fill values (exec/fill.hpp) as host/device functions: the one definition
// both backends use, so the CUDA backend fills buffers on the device with the numbers the CPU
// backend computes on the host (tests check them bit for bit). Plain header: compiled by nvcc
// (exec/cuda/device_ops.cu) and g++ (exec/fill.hpp).
// Products and sums use explicitly rounded operations on the device, so nvcc's FMA contraction
// cannot change a bit relative to the host (which compiles ISO C++ without contraction).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define PARALAB_FILL_HD __host__ __device__ __forceinline__
#else
#define PARALAB_FILL_HD inline
#endif

namespace paralab::exec::fillmath {

PARALAB_FILL_HD uint64_t mix64(uint64_t x) {  // splitmix64's finalizer (Steele et al. 2014); exec/plan.hpp's mix64
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

PARALAB_FILL_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
PARALAB_FILL_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

PARALAB_FILL_HD float unit_uniform(uint64_t key, int64_t index) {
  return mul_rn(static_cast<float>(mix64(key ^ mix64(static_cast<uint64_t>(index))) >> 40), 1.0f / 16777216.0f);
}

// kind: 0 weights (std 0.02), 1 moment1 (+-1e-3), 2 moment2 ([1e-8, 1e-6]).
PARALAB_FILL_HD float fill_value(int kind, uint64_t key, int64_t index) {
  const float u = unit_uniform(key, index);
  switch (kind) {
    case 0: return mul_rn(u - 0.5f, 2.0f * 0.02f * 1.7320508f);
    case 1: return mul_rn(u - 0.5f, 2e-3f);
    case 2: return add_rn(1e-8f, mul_rn(u, 1e-6f - 1e-8f));
    default: return 0.0f;
  }
}

// A parameter region's geometry (exec/plan.hpp ParamRegion without its name), as plain values a
// kernel can take. split: 0 none, 1 rows, 2 cols, 3 qkv_cols, 4 swiglu_cols (ParamSplit's order).
struct ParamGeo {
  int64_t rows = 0, cols = 0, tp = 0, tp_size = 1, heads = 0, groups = 0, head_dim = 0, ffn = 0;
  uint64_t key = 0;
  int32_t split = 0;
  int32_t gain = 0;
};

// Element (r, c) of a rank's parameter shard as the element of the unsharded parameter it is
// (exec/fill.hpp param_value; products explicitly rounded, see above).
PARALAB_FILL_HD float param_value(const ParamGeo& p, int64_t r, int64_t c) {
  int64_t R = r, C = c, full_cols = p.cols;
  if (p.split == 1) {
    R = p.tp * p.rows + r;
  } else if (p.split == 2) {
    C = p.tp * p.cols + c;
    full_cols = p.cols * p.tp_size;
  } else if (p.split == 3) {  // local [Q heads | K groups | V groups] -> global [Q | K | V]
    const int64_t d = p.head_dim, A = p.heads * p.tp_size, G = p.groups * p.tp_size;
    const int64_t q = p.heads * d, k = p.groups * d;
    if (c < q) C = p.tp * q + c;
    else if (c < q + k) C = A * d + p.tp * k + (c - q);
    else C = (A + G) * d + p.tp * k + (c - q - k);
    full_cols = (A + 2 * G) * d;
  } else if (p.split == 4) {  // local [gate | up] -> global [gate | up]
    const int64_t F = p.ffn * p.tp_size;
    C = c < p.ffn ? p.tp * p.ffn + c : F + p.tp * p.ffn + (c - p.ffn);
    full_cols = 2 * F;
  }
  const int64_t index = R * full_cols + C;
  if (p.gain) return add_rn(1.0f, mul_rn(0.05f, unit_uniform(p.key, index) - 0.5f));
  return fill_value(0, p.key, index);
}

PARALAB_FILL_HD int32_t token_id(uint64_t key, int64_t index, int64_t vocab) {
  return static_cast<int32_t>((mix64(key ^ mix64(static_cast<uint64_t>(index))) >> 11) % static_cast<uint64_t>(vocab));
}

}  // namespace paralab::exec::fillmath
