// paralab — correction samples from executions against their simulation (samples.hpp).
#include "analysis/calibration/samples.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <string>

#include "analysis/stats.hpp"
#include "ir/error.hpp"
#include "results/comm_alignment.hpp"
#include "sim/engine/overhead.hpp"

namespace paralab::calib {

namespace {

// Per (rank, op): index into result.ops, or SIZE_MAX.
std::map<int64_t, std::vector<size_t>> index_ops(const StepIR& ir, const StepResult& r) {
  std::map<int64_t, std::vector<size_t>> at;
  for (size_t i = 0; i < r.ops.size(); ++i) {
    const OpTiming& t = r.ops[i];
    if (t.rank < 0 || t.rank >= ir.layout.world())
      throw InternalError("calibrate: a measured op of rank " + std::to_string(t.rank) + " outside the layout");
    const StepGraph& g = ir.graph_for(t.rank);
    if (t.op >= g.ops.size()) throw InternalError("calibrate: measured op " + std::to_string(t.op) + " not in the graph");
    auto& v = at[t.rank];
    if (v.empty()) v.assign(g.ops.size(), SIZE_MAX);
    v[t.op] = i;
  }
  return at;
}

struct Gap {
  CostKind cost = CostKind::dispatch;
  double us = 0;
};

// The gap before op `id` of graph g: its ready time (`ready`) minus its last constraint's end;
// none for the first op of a stream with no dependencies.
template <class EndOf>
std::optional<Gap> gap_before(const StepGraph& g, const std::vector<OpId>& pred, OpId id, double ready, EndOf end_of) {
  const Op& op = g.ops[id];
  double same = -1e300, other = -1e300;
  if (pred[id] != kNoOp) same = end_of(pred[id]);
  for (OpId d : op.deps) {
    double& slot = g.ops[d].stream == op.stream ? same : other;
    slot = std::max(slot, end_of(d));
  }
  if (same == -1e300 && other == -1e300) return std::nullopt;
  return Gap{other > same ? CostKind::handoff : CostKind::dispatch, std::max(0.0, ready - std::max(same, other))};
}

std::vector<OpId> stream_predecessors(const StepGraph& g) {
  std::vector<OpId> pred(g.ops.size(), kNoOp);
  for (const auto& stream : g.streams)
    for (size_t i = 1; i < stream.size(); ++i) pred[stream[i]] = stream[i - 1];
  return pred;
}

}  // namespace

CorrectionSamples correction_samples(const StepIR& ir, const std::vector<StepResult>& runs, const StepResult& simulated,
                                     const std::vector<std::vector<double>>& modeled_us) {
  CorrectionSamples out;
  if (runs.empty()) return out;
  // The simulation, per stage (its representative's ops).
  std::vector<std::vector<const OpTiming*>> sim(ir.stages.size());
  for (size_t s = 0; s < ir.stages.size(); ++s) sim[s].assign(ir.stages[s].ops.size(), nullptr);
  for (const OpTiming& t : simulated.ops) {
    const int64_t stage = ir.layout.stage_of(t.rank);
    if (t.op < sim[static_cast<size_t>(stage)].size()) sim[static_cast<size_t>(stage)][t.op] = &t;
  }
  std::vector<std::vector<OpId>> preds;
  for (const StepGraph& g : ir.stages) preds.push_back(stream_predecessors(g));

  // Per (rank, op, cost): the measured values over the executions.
  std::map<std::tuple<int64_t, OpId, CostKind>, std::vector<double>> measured;
  for (const StepResult& run : runs) {
    StepResult aligned;
    aligned.ops = run.ops;
    align_comm_starts(aligned, ir);
    const auto at = index_ops(ir, run);
    for (const auto& [rank, idx] : at) {
      const StepGraph& g = ir.graph_for(rank);
      const auto& pred = preds[static_cast<size_t>(ir.layout.stage_of(rank))];
      for (OpId id = 0; id < g.ops.size(); ++id) {
        if (idx[id] == SIZE_MAX) continue;
        const OpTiming& t = run.ops[idx[id]];
        const OpTiming& a = aligned.ops[idx[id]];
        if (a.end_us > a.start_us || !is_comm(g.ops[id].kind)) measured[{rank, id, CostKind::time}].push_back(a.end_us - a.start_us);
        bool complete = true;
        auto end_of = [&](OpId d) {
          if (idx[d] == SIZE_MAX) complete = false;
          return idx[d] == SIZE_MAX ? -1e300 : run.ops[idx[d]].end_us;
        };
        const std::optional<Gap> gap = gap_before(g, pred, id, t.start_us, end_of);
        if (gap && complete) measured[{rank, id, gap->cost}].push_back(gap->us);
      }
    }
  }
  for (const auto& [key, values] : measured) {
    const auto [rank, id, cost] = key;
    const size_t stage = static_cast<size_t>(ir.layout.stage_of(rank));
    const StepGraph& g = ir.stages[stage];
    const Op& op = g.ops[id];
    const OpTiming* s = sim[stage][id];
    if (!s) continue;
    double modeled = 0;
    if (cost == CostKind::time) {
      modeled = is_comm(op.kind) ? s->end_us - s->start_us : modeled_us[stage][id];
    } else {
      auto end_of = [&](OpId d) { return sim[stage][d] ? sim[stage][d]->end_us : -1e300; };
      const double ready = is_comm(op.kind) ? s->posted_us : s->start_us;
      const std::optional<Gap> gap = gap_before(g, preds[stage], id, ready, end_of);
      modeled = gap && gap->cost == cost ? gap->us : 0.0;
    }
    out.samples.push_back({cost, sim::op_facts(ir, op, rank), modeled, median(values)});
  }
  return out;
}

}  // namespace paralab::calib
