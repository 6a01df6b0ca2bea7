// paralab — IR-derived accounting for `inspect` (and the simulator's sanity checks).
#include "ir/accounting.hpp"

#include <algorithm>

namespace paralab {

std::string_view to_string(CommClass c) {
  static constexpr std::string_view n[] = {"tp", "cp", "dp", "pp", "other"};
  return n[static_cast<size_t>(c)];
}

CommClass comm_class(GroupKind g) {
  switch (g) {
    case GroupKind::tp: return CommClass::tp;
    case GroupKind::cp: return CommClass::cp;
    case GroupKind::dp: return CommClass::dp;
    case GroupKind::pp: return CommClass::pp;
    default: return CommClass::other;
  }
}

double MemoryBreakdown::resident_total() const {
  double t = 0;
  for (double x : resident) t += x;
  return t;
}

MemoryBreakdown replay_memory(const StepGraph& g) {
  MemoryBreakdown mb;
  for (const Buffer& b : g.buffers)
    if (b.host) mb.host_resident += static_cast<double>(b.bytes());
    else if (b.resident) mb.resident[static_cast<size_t>(b.category)] += static_cast<double>(b.bytes());
  std::array<double, kMemCategories> live{};
  auto transient = [&] { return live[static_cast<size_t>(MemCategory::activations)] + live[static_cast<size_t>(MemCategory::buffers)] +
                                live[static_cast<size_t>(MemCategory::grads)] + live[static_cast<size_t>(MemCategory::weights)]; };
  for (const Op& op : g.ops) {
    for (BufferId b : op.allocs) live[static_cast<size_t>(g.buffers[b].category)] += static_cast<double>(g.buffers[b].bytes());
    const double now = transient();
    if (now > mb.peak_transient) {
      mb.peak_transient = now;
      mb.at_peak = live;
      mb.peak_op = op.id;
    }
    mb.peak_activations = std::max(mb.peak_activations, live[static_cast<size_t>(MemCategory::activations)]);
    for (BufferId b : op.frees) live[static_cast<size_t>(g.buffers[b].category)] -= static_cast<double>(g.buffers[b].bytes());
  }
  return mb;
}

StepSummary summarize(const StepIR& ir) {
  StepSummary out;
  const Scenario& s = ir.scenario;
  out.world_size = ir.layout.world();
  out.parameters_total = ir.shape.total_params();
  out.tokens_per_step = s.tokens_per_step();
  out.memory_capacity_bytes = s.topology.device.memory_gib * 1024.0 * 1024.0 * 1024.0;
  const int64_t ranks_per_stage = ir.layout.tp() * ir.layout.cp() * ir.layout.dp();
  for (const StepGraph& g : ir.stages) {
    StageSummary st;
    st.stage = g.stage;
    st.representative_rank = ir.layout.representative(g.stage);
    st.ranks = ranks_per_stage;
    st.ops = static_cast<int64_t>(g.ops.size());
    st.params = g.model_params;
    for (const Buffer& b : g.buffers) st.params_stored += b.params;
    for (const Op& op : g.ops) {
      if (is_matmul(op.kind)) {
        st.model_flops += op.model_flops;
        st.hardware_flops += op.flops;
      }
      GroupKind gk;
      if (const auto* c = op.collective()) gk = c->group;
      else if (const auto* p = op.p2p()) gk = p->group;
      else continue;
      st.comm_bytes[static_cast<size_t>(comm_class(gk))] += op.wire_bytes(ir.layout.group_size(gk));
    }
    st.memory = replay_memory(g);
    out.model_flops_per_step += st.model_flops * static_cast<double>(ranks_per_stage);
    out.hardware_flops_per_step += st.hardware_flops * static_cast<double>(ranks_per_stage);
    out.peak_memory_bytes = std::max(out.peak_memory_bytes, st.memory.peak_total());
    out.stages.push_back(st);
  }
  out.fits_in_memory = out.peak_memory_bytes <= out.memory_capacity_bytes;
  double host_per_rank = 0;
  for (const StageSummary& st : out.stages) host_per_rank = std::max(host_per_rank, st.memory.host_resident);
  out.host_memory_bytes_per_node = host_per_rank * static_cast<double>(ir.layout.devices_per_node());
  out.host_memory_capacity_bytes = s.topology.host.memory_gib * 1024.0 * 1024.0 * 1024.0;
  out.fits_in_host_memory = host_per_rank == 0 || out.host_memory_bytes_per_node <= out.host_memory_capacity_bytes;
  return out;
}

StepFlops step_flops(const StepIR& ir) {
  StepFlops f;
  const double ranks_per_stage = static_cast<double>(ir.layout.tp() * ir.layout.cp() * ir.layout.dp());
  for (const StepGraph& g : ir.stages)
    for (const Op& op : g.ops)
      if (is_matmul(op.kind)) {
        f.model += op.model_flops * ranks_per_stage;
        f.hardware += op.flops * ranks_per_stage;
      }
  return f;
}

}  // namespace paralab
