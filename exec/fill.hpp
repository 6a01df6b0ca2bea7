// paralab exec — the values every backend fills buffers with (exec/plan.hpp: Fill): a pure
// function of (key, global element index), so data-parallel replicas hold identical weights,
// shards hold the slices of one notional tensor, and CPU and CUDA runs see the same numbers.
// Parameters (param_value) and token ids (their index in the global batch) are moreover the
// same on every layout of a scenario: TP1 and TP2 x PP2 train the same model on the same data.
#pragma once

#include <cstdint>
#include <limits>

#include "exec/fill_math.hpp"
#include "exec/plan.hpp"

namespace paralab::exec {

// Uniform in [0, 1) from 24 bits of a 64-bit hash.
inline float unit_uniform(uint64_t key, int64_t index) { return fillmath::unit_uniform(key, index); }

// The fp32 value of element `index` (global) for a float fill.
inline float fill_value(Fill f, uint64_t key, int64_t index) {
  switch (f) {
    case Fill::weights: return fillmath::fill_value(0, key, index);  // std 0.02
    case Fill::moment1: return fillmath::fill_value(1, key, index);  // +-1e-3
    case Fill::moment2: return fillmath::fill_value(2, key, index);  // [1e-8, 1e-6]
    case Fill::poison: return std::numeric_limits<float>::quiet_NaN();
    default: return 0.0f;
  }
}

// fillmath::ParamGeo::split numbers ParamSplit in its order.
static_assert(static_cast<int>(ParamSplit::none) == 0 && static_cast<int>(ParamSplit::rows) == 1 &&
              static_cast<int>(ParamSplit::cols) == 2 && static_cast<int>(ParamSplit::qkv_cols) == 3 &&
              static_cast<int>(ParamSplit::swiglu_cols) == 4);

// A parameter region's geometry as the plain values fillmath (and a CUDA kernel) takes.
inline fillmath::ParamGeo param_geo(const ParamRegion& r) {
  fillmath::ParamGeo g;
  g.rows = r.rows;
  g.cols = r.cols;
  g.tp = r.tp;
  g.tp_size = r.tp_size;
  g.heads = r.heads;
  g.groups = r.groups;
  g.head_dim = r.head_dim;
  g.ffn = r.ffn;
  g.key = r.key;
  g.split = static_cast<int32_t>(r.split);
  g.gain = r.gain ? 1 : 0;
  return g;
}

// Element (r, c) of a rank's parameter shard, as the element of the unsharded parameter it is:
// the same value on every layout (exec/plan.hpp: ParamRegion). A loop over a region takes
// param_geo once and calls fillmath::param_value.
inline float param_value(const ParamRegion& p, int64_t r, int64_t c) { return fillmath::param_value(param_geo(p), r, c); }

inline int32_t token_id(uint64_t key, int64_t index, int64_t vocab) { return fillmath::token_id(key, index, vocab); }

}  // namespace paralab::exec
