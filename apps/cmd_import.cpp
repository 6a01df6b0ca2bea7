// paralab import — another tool's configuration as a paralab scenario: Megatron-LM's arguments
// (typed, or a launch script's training command) or a NeMo training YAML. What was not
// converted is named on stderr and at the top of the written file (docs/interop.md).
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/cli.hpp"
#include "apps/commands.hpp"
#include "interop/megatron_args.hpp"
#include "interop/nemo_config.hpp"

namespace paralab::cli {

namespace {

const std::vector<OptionSpec> kOptions = {
    {"--out", true, "write the scenario to FILE.toml (default: stdout)"},
    {"--file", true, "megatron: the launch script (bash) whose pretrain_*.py command to convert"},
    {"--gpus", true, "all GPUs of the run (overrides the input's torchrun / trainer counts)"},
    {"--nodes", true, "nodes of the topology (overrides the input's)"},
    {"--topology", true, "the hardware: a name in topologies/ or a .toml (default: dgx-h100)"},
    {"--vocab-size", true,
     "nemo: the tokenizer's vocabulary when no tokenizer hint gives it (megatron: its own --vocab-size)"},
    {"--help", false, "this help"},
};

constexpr const char* kUsage =
    "usage: paralab import megatron [--file launch.sh] [options] [--] MEGATRON-ARGS...\n"
    "       paralab import nemo FILE.yaml [options]\n";

struct ImportArgs {
  std::string tool;
  std::vector<std::string> rest;  // megatron: its arguments; nemo: the file
  std::optional<std::string> out, file;
  interop::ImportOptions opts;
  bool json = false, help = false;
};

int64_t count(const std::string& opt, const std::string& v) {
  const double x = parse_number(opt, v, 1, 1e7);
  if (x != static_cast<double>(static_cast<int64_t>(x)))
    throw UsageError(opt + " needs a whole number, got '" + v + "'");
  return static_cast<int64_t>(x);
}

// The import's own options anywhere; every other word belongs to the tool (after `--`, all do).
ImportArgs parse_import(int argc, char** argv) {
  ImportArgs a;
  bool passthrough = false;
  for (int i = 1; i < argc; ++i) {
    std::string w = argv[i], value;
    const size_t eq = w.find('=');
    const std::string name = w.rfind("--", 0) == 0 && eq != std::string::npos ? w.substr(0, eq) : w;
    const bool own =
        !passthrough && (name == "--out" || name == "--file" || name == "--gpus" || name == "--nodes" ||
                         name == "--topology" || name == "--set" || (name == "--vocab-size" && a.tool == "nemo"));
    if (own) {
      if (eq != std::string::npos && name != w)
        value = w.substr(eq + 1);
      else if (i + 1 < argc)
        value = argv[++i];
      else
        throw UsageError(name + " needs a value");
    }
    if (!passthrough && w == "--")
      passthrough = true;
    else if (!passthrough && (w == "--help" || w == "-h"))
      a.help = true;
    else if (!passthrough && w == "--json")
      a.json = true;
    else if (!own && a.tool.empty())
      a.tool = w;
    else if (!own)
      a.rest.push_back(w);
    else if (name == "--out")
      a.out = value;
    else if (name == "--file")
      a.file = value;
    else if (name == "--gpus")
      a.opts.gpus = count(name, value);
    else if (name == "--nodes")
      a.opts.nodes = count(name, value);
    else if (name == "--topology")
      a.opts.topology = value;
    else if (name == "--set")
      a.opts.sets.push_back(value);
    else
      a.opts.vocab_size = count(name, value);
  }
  return a;
}

nlohmann::json to_json(const interop::ScenarioDraft& d, const std::optional<std::string>& out) {
  nlohmann::json j = {{"tool", d.tool}, {"source", d.source}, {"notes", d.notes()}};
  if (out)
    j["out"] = *out;
  else
    j["toml"] = d.toml();
  const char* kinds[] = {"ignored", "unsupported", "unknown"};
  j["skipped"] = nlohmann::json::array();
  for (const interop::Skipped& s : d.skipped())
    j["skipped"].push_back({{"name", s.item.name},
                            {"value", s.item.value()},
                            {"file", s.item.loc.file},
                            {"line", s.item.loc.line},
                            {"kind", kinds[static_cast<int>(s.kind)]},
                            {"reason", s.reason}});
  return j;
}

}  // namespace

int run_import(int argc, char** argv) {
  ImportArgs a = parse_import(argc, argv);
  if (a.help || a.tool.empty()) {
    if (!a.help) throw UsageError("missing the tool: megatron or nemo");
    std::printf("%s%s", kUsage, options_help(kOptions).c_str());
    return 0;
  }
  if (a.out) check_writable("--out", *a.out);
  if (a.out && a.opts.name.empty()) a.opts.name = std::filesystem::path(*a.out).stem().string();
  interop::ScenarioDraft d;
  if (a.tool == "megatron") {
    if (!a.file && a.rest.empty()) throw UsageError("give Megatron-LM's arguments, or --file launch.sh");
    d = a.file ? interop::import_megatron_script(*a.file, a.rest, a.opts)
               : interop::import_megatron_args(a.rest, a.opts);
  } else if (a.tool == "nemo") {
    if (a.file) throw UsageError("--file is for megatron; give the YAML file itself: paralab import nemo FILE.yaml");
    if (a.rest.size() != 1) throw UsageError("give one NeMo training YAML file");
    d = interop::import_nemo(a.rest[0], a.opts);
  } else {
    throw UsageError("unknown tool '" + a.tool + "' (allowed: megatron, nemo)");
  }
  const std::string report = d.report();
  std::fprintf(stderr, "paralab import %s: converted %s%s%s", d.tool.c_str(), d.source.c_str(),
               a.out ? (" into " + *a.out).c_str() : "", report.empty() ? "\n" : ":\n");
  std::fputs(report.c_str(), stderr);
  if (a.out) write_file_atomic(*a.out, d.toml());
  if (a.json)
    std::printf("%s\n", to_json(d, a.out).dump(2).c_str());
  else if (!a.out)
    std::fputs(d.toml().c_str(), stdout);
  return 0;
}

}  // namespace paralab::cli
