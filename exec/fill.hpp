// paralab exec — the values every backend fills buffers with (exec/plan.hpp: Fill): a pure
// function of (key, global element index), so data-parallel replicas hold identical weights,
// shards hold the slices of one notional tensor, and CPU and CUDA runs see the same numbers.
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

inline int32_t token_id(uint64_t key, int64_t index, int64_t vocab) {
  return static_cast<int32_t>((mix64(key ^ mix64(static_cast<uint64_t>(index))) >> 11) % static_cast<uint64_t>(vocab));
}

}  // namespace paralab::exec
