// paralab inspect — what a layout costs before anything runs: parameters, FLOPs,
// communication volume and memory per rank, computed from the generated IR.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "apps/cli.hpp"
#include "apps/commands.hpp"
#include "apps/inspect_moe.hpp"
#include "ir/accounting.hpp"
#include "ir/ir_json.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/summary_json.hpp"

namespace paralab::cli {

namespace {

const std::vector<OptionSpec> kOptions = {
    {"--dump-ir", true, "write the IR as JSON to FILE (docs/ir.md)"},
    {"--rank", true, "with --dump-ir: only this rank's graph, with concrete peers"},
    {"--help", false, "this help"},
};

std::string human(double x, const char* unit) {
  const char* prefixes[] = {"", "K", "M", "G", "T", "P", "E"};
  int i = 0;
  while (std::abs(x) >= 1000 && i < 6) x /= 1000, ++i;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g %s%s", x, prefixes[i], unit);
  return buf;
}

void print_table(const StepSummary& s, const StepIR& ir) {
  constexpr double GiB = 1024.0 * 1024.0 * 1024.0;
  const Scenario& sc = ir.scenario;
  const auto& p = sc.parallel;
  std::printf("scenario   %s (%s on %lld x %s)\n", sc.name.c_str(), sc.model.preset.empty() ? "custom model" : sc.model.preset.c_str(),
              static_cast<long long>(s.world_size), sc.topology.device.name.c_str());
  std::printf("layout     TP%lld PP%lld CP%lld DP%lld  (v=%lld, %s, ZeRO-%lld, recompute %s%s), %lld micro-batches of %lld\n",
              (long long)p.tensor, (long long)p.pipeline, (long long)p.context, (long long)p.data,
              (long long)p.virtual_pipeline_stages, std::string(to_string(p.schedule)).c_str(), (long long)p.zero_stage,
              std::string(to_string(sc.training.recompute)).c_str(), p.sequence_parallel ? ", SP" : "",
              (long long)sc.num_microbatches(), (long long)sc.training.micro_batch_size);
  std::printf("parameters %s total, all active (dense)\n", human(static_cast<double>(s.parameters_total), "").c_str());
  std::printf("FLOPs      %s model, %s hardware per step (%s tokens)\n", human(s.model_flops_per_step, "FLOP").c_str(),
              human(s.hardware_flops_per_step, "FLOP").c_str(), human(static_cast<double>(s.tokens_per_step), "").c_str());
  std::printf("memory     peak %.2f GiB of %.0f GiB per device: %s\n", s.peak_memory_bytes / GiB,
              s.memory_capacity_bytes / GiB, s.fits_in_memory ? "fits" : "DOES NOT FIT");
  if (s.host_memory_bytes_per_node > 0) {  // optimizer / parameter offload (docs/offload.md)
    double per_rank = 0;
    for (const auto& st : s.stages) per_rank = std::max(per_rank, st.memory.host_resident);
    std::printf("host       %.2f GiB pinned per rank (offloaded optimizer%s), %.2f of %.0f GiB per node: %s\n",
                per_rank / GiB, p.offload_param == OffloadParam::cpu ? " and parameters" : "",
                s.host_memory_bytes_per_node / GiB, s.host_memory_capacity_bytes / GiB,
                s.fits_in_host_memory ? "fits" : "DOES NOT FIT");
  }
  std::printf("\n");
  std::printf("%5s %10s %8s | %9s %9s %9s %9s %9s | %8s %8s %8s %8s %8s %8s\n", "stage", "params", "ops", "tp", "cp",
              "dp", "pp", "other", "weights", "grads", "optim", "activ", "buffers", "total");
  std::printf("%5s %10s %8s | %49s | %53s\n", "", "per rank", "", "bytes sent per rank per step", "GiB per rank at peak");
  for (const auto& st : s.stages) {
    const auto& m = st.memory;
    const double act = m.at_peak[static_cast<size_t>(MemCategory::activations)];
    std::printf("%5lld %10s %8lld | %9s %9s %9s %9s %9s | %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f\n", (long long)st.stage,
                human(static_cast<double>(st.params), "").c_str(), (long long)st.ops, human(st.comm_bytes[0], "B").c_str(),
                human(st.comm_bytes[1], "B").c_str(), human(st.comm_bytes[2], "B").c_str(),
                human(st.comm_bytes[3], "B").c_str(), human(st.comm_bytes[4], "B").c_str(),
                m.resident[static_cast<size_t>(MemCategory::weights)] / GiB,
                m.resident[static_cast<size_t>(MemCategory::grads)] / GiB,
                m.resident[static_cast<size_t>(MemCategory::optimizer)] / GiB, act / GiB,
                (m.peak_transient - act) / GiB, m.peak_total() / GiB);
  }
}

}  // namespace

int run_inspect(int argc, char** argv) {
  const Args a = parse(argc, argv, 1, kOptions);
  if (a.flag("--help")) {
    std::printf("usage: paralab inspect SCENARIO [options]\n%s", options_help(kOptions).c_str());
    return 0;
  }
  const Scenario s = load_scenario(a.require_positional(0, "SCENARIO"), a.sets);
  check_outputs(a, {"--dump-ir"});
  std::optional<int64_t> rank;
  if (auto r = a.value("--rank")) {
    try {
      rank = std::stoll(*r);
    } catch (const std::exception&) {
      throw UsageError("--rank needs an integer, got '" + *r + "'");
    }
    if (*rank < 0 || *rank >= s.world_size())
      throw UsageError("--rank " + *r + " is outside 0.." + std::to_string(s.world_size() - 1));
    if (!a.value("--dump-ir")) throw UsageError("--rank only applies to --dump-ir");
  }
  if (s.model.moe.enabled() || s.model.mla.multi_latent_attention) {
    if (a.value("--dump-ir")) require_generated_model(s);  // refuses, naming the key
    return inspect_model_only(s, a.flag("--json"));
  }
  const StepIR ir = build_step_ir(s);
  const StepSummary sum = summarize(ir);
  if (auto path = a.value("--dump-ir")) {
    std::ostringstream os;
    write_ir_json(os, ir, rank);
    write_file_atomic(*path, os.str());
  }
  if (a.flag("--json")) std::printf("%s\n", to_json(sum, ir).dump(2).c_str());
  else print_table(sum, ir);
  return 0;
}

}  // namespace paralab::cli
