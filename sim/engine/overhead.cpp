// paralab — each op's corrections from the topology's table (semantics in overhead.hpp).
#include "sim/engine/overhead.hpp"

#include <array>
#include <optional>

namespace paralab::sim {

namespace {

std::optional<Span> span_of(const Layout& L, const std::vector<int64_t>& ranks) {
  if (ranks.size() < 2) return std::nullopt;
  for (int64_t r : ranks)
    if (L.node_of(r) != L.node_of(ranks.front())) return Span::inter_node;
  return Span::intra_node;
}

// The members an op's span is judged over: a collective's group, a transfer's two ends.
std::vector<int64_t> span_ranks(const StepIR& ir, const Op& op, int64_t rank) {
  if (op.kind == OpKind::collective) return ir.group_of(rank, op);
  if (op.kind == OpKind::send || op.kind == OpKind::sendrecv) return {rank, ir.peer_of(rank, op, true)};
  if (op.kind == OpKind::recv) return {rank, ir.peer_of(rank, op, false)};
  return {};
}

}  // namespace

OpFacts op_facts(const StepIR& ir, const Op& op, int64_t rank) {
  OpFacts f;
  f.kind = op.kind;
  f.phase = op.phase;
  f.bytes = op.bytes;
  if (const CollectiveAttrs* c = op.collective()) {
    f.collective = c->kind;
    f.bytes = static_cast<double>(c->bytes);
  } else if (const P2PAttrs* p = op.p2p()) {
    f.bytes = static_cast<double>(p->bytes);
  }
  if (is_comm(op.kind)) {
    std::vector<int64_t> ranks = span_ranks(ir, op, rank);
    std::erase(ranks, int64_t{-1});
    f.span = span_of(ir.layout, ranks);
  }
  return f;
}

std::vector<OpOverhead> stage_overheads(const StepIR& ir, const StepGraph& g, int64_t rank) {
  const CorrectionTable& table = ir.scenario.topology.calibration.corrections;
  if (table.empty()) return {};
  std::vector<OpOverhead> out(g.ops.size());
  // A collective's span depends on its group kind only: resolved once per kind.
  std::array<std::optional<std::optional<Span>>, static_cast<size_t>(GroupKind::kCount)> coll_span{};
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    OpFacts f;
    if (const CollectiveAttrs* c = op.collective()) {
      auto& cached = coll_span[static_cast<size_t>(c->group)];
      if (!cached) cached = span_of(ir.layout, ir.group_of(rank, op));
      f = OpFacts{op.kind, c->kind, *cached, op.phase, static_cast<double>(c->bytes)};
    } else {
      f = op_facts(ir, op, rank);
    }
    out[i].time = table.find(CostKind::time, f);
    out[i].dispatch_us = table.find(CostKind::dispatch, f).fixed_us;
    out[i].handoff_us = table.find(CostKind::handoff, f).fixed_us;
  }
  return out;
}

}  // namespace paralab::sim
