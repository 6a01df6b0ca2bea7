// paralab — JSON for the IR-derived step summary.
#include "ir/summary_json.hpp"

#include "ir/enum_names.hpp"

namespace paralab {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

nlohmann::json memory_json(const MemoryBreakdown& m) {
  nlohmann::json j;
  for (int c = 0; c < kMemCategories; ++c) {
    const auto cat = static_cast<MemCategory>(c);
    if (cat == MemCategory::activations || cat == MemCategory::buffers) continue;
    j[std::string(to_string(cat)) + "_gib"] = m.resident[static_cast<size_t>(c)] / kGiB;
  }
  j["peak_activations_gib"] = m.at_peak[static_cast<size_t>(MemCategory::activations)] / kGiB;
  j["peak_buffers_gib"] = (m.peak_transient - m.at_peak[static_cast<size_t>(MemCategory::activations)]) / kGiB;
  j["max_activations_gib"] = m.peak_activations / kGiB;
  j["peak_total_gib"] = m.peak_total() / kGiB;
  if (m.host_resident > 0) j["host_gib"] = m.host_resident / kGiB;
  return j;
}
}  // namespace

nlohmann::json layout_json(const Scenario& s) {
  const ParallelConfig& p = s.parallel;
  return {{"tensor", p.tensor},
          {"pipeline", p.pipeline},
          {"context", p.context},
          {"data", p.data},
          {"virtual_pipeline_stages", p.virtual_pipeline_stages},
          {"schedule", enum_to_string(p.schedule)},
          {"micro_batch_size", s.training.micro_batch_size},
          {"zero_stage", p.zero_stage},
          {"recompute", enum_to_string(s.training.recompute)},
          {"sequence_parallel", p.sequence_parallel}};
}

nlohmann::json to_json(const StepSummary& s, const StepIR& ir) {
  nlohmann::json j;
  j["scenario"] = ir.scenario.name;
  j["world_size"] = s.world_size;
  j["layout"] = layout_json(ir.scenario);
  j["num_microbatches"] = ir.scenario.num_microbatches();
  j["tokens_per_step"] = s.tokens_per_step;
  j["parameters_total"] = s.parameters_total;
  j["parameters_active"] = s.parameters_total;  // the generated IR is dense: every parameter is active
  j["parameters_mtp"] = 0;
  int64_t max_params = 0;
  for (const auto& st : s.stages) max_params = std::max(max_params, st.params);
  j["parameters_per_rank_max"] = max_params;
  j["model_flops_per_step"] = s.model_flops_per_step;
  j["hardware_flops_per_step"] = s.hardware_flops_per_step;
  j["peak_memory_gib"] = s.peak_memory_bytes / kGiB;
  j["memory_capacity_gib"] = s.memory_capacity_bytes / kGiB;
  j["fits_in_memory"] = s.fits_in_memory;
  if (s.host_memory_bytes_per_node > 0) {  // optimizer / parameter offload
    j["host_memory_per_node_gib"] = s.host_memory_bytes_per_node / kGiB;
    j["host_memory_capacity_gib"] = s.host_memory_capacity_bytes / kGiB;
    j["fits_in_host_memory"] = s.fits_in_host_memory;
  }
  nlohmann::json comm = nlohmann::json::object();
  for (int c = 0; c < kCommClasses; ++c) {
    double mx = 0;
    for (const auto& st : s.stages) mx = std::max(mx, st.comm_bytes[static_cast<size_t>(c)]);
    comm[std::string(to_string(static_cast<CommClass>(c)))] = mx;
  }
  j["comm_bytes_per_rank_max"] = comm;
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& st : s.stages) {
    nlohmann::json e;
    e["stage"] = st.stage;
    e["representative_rank"] = st.representative_rank;
    std::vector<int64_t> ranks;
    for (int64_t r = 0; r < ir.layout.world(); ++r)
      if (ir.layout.stage_of(r) == st.stage) ranks.push_back(r);
    e["ranks"] = ranks;
    e["parameters"] = st.params;
    e["parameters_stored"] = st.params_stored;
    e["ops"] = st.ops;
    e["model_flops"] = st.model_flops;
    e["hardware_flops"] = st.hardware_flops;
    nlohmann::json c = nlohmann::json::object();
    for (int k = 0; k < kCommClasses; ++k) c[std::string(to_string(static_cast<CommClass>(k)))] = st.comm_bytes[static_cast<size_t>(k)];
    e["comm_bytes"] = c;
    e["memory"] = memory_json(st.memory);
    e["fits_in_memory"] = st.memory.peak_total() <= s.memory_capacity_bytes;
    stages.push_back(e);
  }
  // Every rank of a stage runs the same graph, so per-rank detail is per stage.
  j["per_rank"] = stages;
  return j;
}

}  // namespace paralab
