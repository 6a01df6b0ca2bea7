// paralab — an admissible lower bound on a layout's step time, without simulating it
// (docs/planner.md, "Pruning"): the planner simulates candidates in the order of their bound
// and stops where the bound passes the N-th best step found, so a layout that could rank in the
// top N is never discarded.
//
// Compute: per micro-batch, from a one-layer probe of the layout (the same tensor, context and
// sequence parallelism, micro-batch and recomputation; one stage, one micro-batch), the compute
// model's time of a transformer layer's forward (F) and backward with its recomputation (B)
// and of the embedding and the head, on the probe's compute stream (corrections applied).
// Then, for pipeline stage s of p, holding L_s layers over its chunks, with m micro-batches:
//
//   busy_s  = m (L_s (F + B) + embedding and head where the stage holds them)
//   fill_s  = the forwards of micro-batch 0 on every virtual stage before stage s's first
//   drain_s = the backwards of the last micro-batch on every virtual stage below it
//   compute = max_s (fill_s + busy_s + drain_s)
//
// Admissible because a stage's compute stream runs its ops one after another and never faster
// than the compute model (beside communication it only slows), its first op needs micro-batch
// 0's activations from the stages before it, and its last backward's gradient must still pass
// through every stage below it (GPipe, 1F1B and interleaved 1F1B move every micro-batch through
// the stages in order; with equal stages the bound is the compute-only (m + p - 1) (F + B) of
// Narayanan et al. 2021, Sec. 2.2).
//
// Data parallelism: stage 0's data-parallel collectives run one after another on its own
// stream, each no faster than bytes x the least us per byte of the algorithms the network model
// may pick for it (a call costs latency + bytes x us_per_byte, and shared links only slow it).
// From probes of 1 and 2 layers by 1 and 2 micro-batches (the layout's tensor, context and
// data parallelism and ZeRO stage, on the ranks stage 0 occupies), that time per layer (D) and
// per layer and micro-batch (G); then
//
//   data    = (1 - 1e-3) L_0 (D + m G)          (the margin covers bucket padding)
//   bound   = max(compute, data)
//
// Communication beside these, the optimizer, gaps and the data-parallel tail are left out: they
// only add time.
#pragma once

#include <map>
#include <mutex>
#include <tuple>

#include "ir/scenario.hpp"

namespace paralab {

// Per micro-batch compute on one rank (us).
struct LayerCosts {
  double layer_fwd_us = 0, layer_bwd_us = 0;  // one transformer layer (backward with its recomputation)
  double embedding_fwd_us = 0, embedding_bwd_us = 0;
  double head_fwd_us = 0, head_bwd_us = 0;    // final norm, output layer and loss
};

// Bandwidth-only data-parallel time of one layer on stage 0 (us): per step and per micro-batch.
struct DpCosts {
  double layer_us = 0, layer_mb_us = 0;
};

// Probes are shared by layouts with the same per-layer work: thread-safe.
class LowerBound {
 public:
  // Seconds; 0 when the probe cannot be built (the layout is then never pruned).
  double step_s(const Scenario& s);
  [[nodiscard]] size_t probes() const;

 private:
  LayerCosts costs(const Scenario& s);
  DpCosts dp_costs(const Scenario& s);
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, int>;  // tensor, context, micro-batch, SP, recompute
  using DpKey = std::tuple<int64_t, int64_t, int64_t, int64_t>;  // tensor, context, data, ZeRO stage
  mutable std::mutex mu_;
  std::map<Key, LayerCosts> cache_;
  std::map<DpKey, DpCosts> dp_cache_;
};

// The one-layer probe of `s`'s per-layer work, and its data-parallel probes (exposed for tests;
// plan/dp_probe.cpp). DpCosts are zero without data parallelism or when stage 0's ranks do not
// make whole nodes.
LayerCosts probe_layer_costs(const Scenario& s);

// The scenario both probes start from: `s` on one pipeline stage (1F1B, no uneven split) with
// `layers` layers, `data`-way data parallelism and `microbatches` micro-batches.
Scenario one_stage_probe(const Scenario& s, int64_t layers, int64_t microbatches, int64_t data);
DpCosts probe_dp_costs(const Scenario& s);

}  // namespace paralab
