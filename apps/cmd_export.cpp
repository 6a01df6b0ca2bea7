// paralab export — a scenario's step in another tool's format. `paralab export chakra
// SCENARIO DIR`: one MLCommons Chakra execution trace per rank (DIR/<prefix>.<rank>.et) and the
// process groups their collectives name (DIR/comm_group.json, ASTRA-sim's format), with the
// durations paralab's simulator predicts (chakra/chakra_export.hpp, docs/interop.md "Chakra").
#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/cli.hpp"
#include "apps/commands.hpp"
#include "chakra/chakra_export.hpp"
#include "chakra/node_table.hpp"
#include "ir/scenario_loader.hpp"
#include "sim/simulate.hpp"

namespace paralab::cli {

namespace {

const std::vector<OptionSpec> kOptions = {
    {"--prefix", true, "trace file names: PREFIX.<rank>.et (default: paralab)"},
    {"--help", false, "this help"},
};

constexpr const char* kUsage = "usage: paralab export chakra SCENARIO DIR [--prefix P] [--json] [--set section.key=value ...]\n";

int export_chakra_dir(const Args& a) {
  const std::string prefix = a.value("--prefix").value_or("paralab");
  if (prefix.empty() || prefix.find('/') != std::string::npos) throw UsageError("--prefix needs a file-name prefix without '/'");
  const Scenario s = load_scenario(a.require_positional(1, "SCENARIO"), a.sets);
  const std::filesystem::path dir = a.require_positional(2, "DIR");
  const StepIR ir = build_step_ir(s);
  // The traces carry one duration per op: the representative's of its stage, so per-rank
  // variation is not exported (simulated without it).
  const VariationConfig none;
  sim::SimulateOptions opt;
  opt.variation = &none;
  const sim::Simulation sim = sim::simulate(ir, opt);
  const chakra::ChakraExport out = chakra::export_chakra(ir, sim, prefix);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!std::filesystem::is_directory(dir)) throw InputError("DIR '" + dir.string() + "' is not a folder and cannot be made one");
  check_writable("DIR", dir / out.files.front().name);
  for (const chakra::TraceFile& f : out.files) write_file_atomic(dir / f.name, f.content);
  const int64_t world = ir.layout.world();
  if (a.flag("--json")) {
    nlohmann::json types = nlohmann::json::object();
    for (size_t t = 0; t < out.nodes_by_type.size(); ++t)
      if (out.nodes_by_type[t]) types[std::string(chakra::to_string(static_cast<chakra::EtNodeType>(t)))] = out.nodes_by_type[t];
    std::printf("%s\n", nlohmann::json{{"dir", dir.string()}, {"ranks", world}, {"files", out.files.size()},
                                       {"nodes_by_type", types}, {"process_groups", out.groups},
                                       {"step_time_s", sim.result.step_time_s}}.dump(2).c_str());
    return 0;
  }
  std::printf("wrote %lld Chakra traces %s/%s.<rank>.et and %s (%lld process groups)\n", (long long)world,
              dir.string().c_str(), prefix.c_str(), "comm_group.json", (long long)out.groups);
  std::printf("nodes       ");
  for (size_t t = 0; t < out.nodes_by_type.size(); ++t)
    if (out.nodes_by_type[t])
      std::printf("%s %lld  ", std::string(chakra::to_string(static_cast<chakra::EtNodeType>(t))).c_str(),
                  (long long)out.nodes_by_type[t]);
  std::printf("\nstep time   %.3f ms predicted (paralab simulate --chakra %s replays it)\n", sim.result.step_time_s * 1e3,
              dir.string().c_str());
  return 0;
}

}  // namespace

int run_export(int argc, char** argv) {
  const Args a = parse(argc, argv, 1, kOptions);
  if (a.flag("--help")) {
    std::printf("%s%s", kUsage, options_help(kOptions).c_str());
    return 0;
  }
  const std::string format = a.require_positional(0, "FORMAT");
  if (format != "chakra") throw UsageError("unknown export format '" + format + "' (allowed: chakra)");
  if (a.positional.size() > 3) throw UsageError("SCENARIO and DIR expected, got '" + a.positional[3] + "' too");
  return export_chakra_dir(a);
}

}  // namespace paralab::cli
