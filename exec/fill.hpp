// paralab exec — the values every backend fills buffers with (exec/plan.hpp: Fill): a pure
// function of (key, global element index), so data-parallel replicas hold identical weights,
// shards hold the slices of one notional tensor, and CPU and CUDA runs see the same numbers.
// Parameters (param_value) and token ids (their index in the global batch) are moreover the
// same on every layout of a scenario: TP1 and TP2 x PP2 train the same model on the same data.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "exec/plan.hpp"

namespace paralab::exec {

// Uniform in [0, 1) from 24 bits of a 64-bit hash.
inline float unit_uniform(uint64_t key, int64_t index) {
  return static_cast<float>(mix64(key ^ mix64(static_cast<uint64_t>(index))) >> 40) * (1.0f / 16777216.0f);
}

// The fp32 value of element `index` (global) for a float fill.
inline float fill_value(Fill f, uint64_t key, int64_t index) {
  const float u = unit_uniform(key, index);
  switch (f) {
    case Fill::weights: return (u - 0.5f) * (2.0f * 0.02f * 1.7320508f);  // std 0.02
    case Fill::moment1: return (u - 0.5f) * 2e-3f;
    case Fill::moment2: return 1e-8f + u * (1e-6f - 1e-8f);
    case Fill::poison: return std::numeric_limits<float>::quiet_NaN();
    default: return 0.0f;
  }
}

// Element (r, c) of a rank's parameter shard, as the element of the unsharded parameter it is:
// the same value on every layout (exec/plan.hpp: ParamRegion).
inline float param_value(const ParamRegion& p, int64_t r, int64_t c) {
  int64_t R = r, C = c, full_cols = p.cols;
  switch (p.split) {
    case ParamSplit::none: break;
    case ParamSplit::rows: R = p.tp * p.rows + r; break;
    case ParamSplit::cols:
      C = p.tp * p.cols + c;
      full_cols = p.cols * p.tp_size;
      break;
    case ParamSplit::qkv_cols: {  // local [Q heads | K groups | V groups] -> global [Q | K | V]
      const int64_t d = p.head_dim, A = p.heads * p.tp_size, G = p.groups * p.tp_size;
      const int64_t q = p.heads * d, k = p.groups * d;
      if (c < q) C = p.tp * q + c;
      else if (c < q + k) C = A * d + p.tp * k + (c - q);
      else C = (A + G) * d + p.tp * k + (c - q - k);
      full_cols = (A + 2 * G) * d;
      break;
    }
    case ParamSplit::swiglu_cols: {  // local [gate | up] -> global [gate | up]
      const int64_t F = p.ffn * p.tp_size;
      C = c < p.ffn ? p.tp * p.ffn + c : F + p.tp * p.ffn + (c - p.ffn);
      full_cols = 2 * F;
      break;
    }
  }
  const int64_t index = R * full_cols + C;
  if (p.gain) return 1.0f + 0.05f * (unit_uniform(p.key, index) - 0.5f);
  return fill_value(Fill::weights, p.key, index);
}

inline int32_t token_id(uint64_t key, int64_t index, int64_t vocab) {
  return static_cast<int32_t>((mix64(key ^ mix64(static_cast<uint64_t>(index))) >> 11) % static_cast<uint64_t>(vocab));
}

}  // namespace paralab::exec
