// paralab — fuzzing harness (see harness.hpp for the policy).
#include "fuzz/harness.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <typeinfo>
#include <unistd.h>

#include "ir/error.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/step_ir.hpp"
#include "ir/topology_loader.hpp"
#include "sim/simulate.hpp"

namespace paralab::fuzz {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kMarker = "#@topology";

void write_file(const fs::path& p, std::string_view text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) throw std::runtime_error("fuzz harness: cannot write " + p.string());
}

// Splits "scenario \n#@topology\n topology" at the first marker line.
std::pair<std::string_view, std::optional<std::string_view>> split_input(std::string_view data) {
  size_t pos = 0;
  while (pos <= data.size()) {
    const size_t eol = std::min(data.find('\n', pos), data.size());
    std::string_view line = data.substr(pos, eol - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line == kMarker) {
      const size_t rest = std::min(eol + 1, data.size());
      return {data.substr(0, pos), data.substr(rest)};
    }
    if (eol == data.size()) break;
    pos = eol + 1;
  }
  return {data, std::nullopt};
}

// Everything after loading: the IR generator and the simulator, on small scenarios only.
void push_further(const Scenario& s, const Limits& limits, Outcome& out) {
  if (!limits.build_ir) return;
  const ParallelConfig& p = s.parallel;
  const int64_t world = p.world();
  const int64_t mbs = s.num_microbatches();
  if (world > limits.max_world || s.model.num_layers * mbs > limits.max_layers_x_microbatches ||
      p.pipeline * p.virtual_pipeline_stages > limits.max_pipeline_chunks)
    return;
  const StepIR ir = build_step_ir(s);
  out.built_ir = true;
  if (!limits.simulate) return;
  size_t ops = 0;
  for (const StepGraph& g : ir.stages) ops += g.ops.size();
  if (ops > static_cast<size_t>(limits.max_sim_ops)) return;
  sim::SimulateOptions o;
  o.check_invariants = true;
  (void)sim::simulate(ir, o);
  out.simulated = true;
}

template <class Body>
Outcome guarded(Body&& body) {
  Outcome out;
  try {
    body(out);
    out.kind = Outcome::Kind::accepted;
  } catch (const ConfigError& e) {
    out.detail = e.what();
    const std::string why = unclear_error(e);
    out.kind = why.empty() ? Outcome::Kind::rejected : Outcome::Kind::bug;
    if (!why.empty()) out.detail = "unclear ConfigError (" + why + "): " + out.detail;
  } catch (const InternalError& e) {
    out.kind = Outcome::Kind::bug;
    out.detail = std::string("InternalError") + (out.built_ir ? " (after the IR was built)" : "") +
                 ": " + e.what();
  } catch (const std::exception& e) {
    out.kind = Outcome::Kind::bug;
    out.detail = std::string("unexpected exception ") + typeid(e).name() + ": " + e.what();
  } catch (...) {
    out.kind = Outcome::Kind::bug;
    out.detail = "unexpected exception of a non-standard type";
  }
  return out;
}

}  // namespace

std::string unclear_error(const ConfigError& e) {
  const std::string what = e.what();
  if (e.loc().file.empty()) return "no file named";
  if (e.loc().line <= 0 && e.key().empty()) return "neither a line nor a key named";
  if (e.problem().empty()) return "no problem stated";
  if (what.rfind(e.loc().str(), 0) != 0) return "message does not start with file:line";
  return {};
}

Outcome run_scenario_input(std::string_view data, const fs::path& dir, const Limits& limits) {
  const auto [scenario, topology] = split_input(data);
  const fs::path scn = dir / "scenario.toml", topo = dir / "topo.toml";
  write_file(scn, scenario);
  std::error_code ec;
  if (topology) write_file(topo, *topology);
  else fs::remove(topo, ec);  // a stale one would make the outcome depend on the last input
  return guarded([&](Outcome& out) {
    const Scenario s = load_scenario(scn);
    push_further(s, limits, out);
  });
}

Outcome run_topology_input(std::string_view data, const fs::path& dir, const Limits& limits) {
  const fs::path topo = dir / "topo.toml", scn = dir / "scenario.toml";
  write_file(topo, data);
  return guarded([&](Outcome& out) {
    const Topology t = load_topology(topo);
    if (!limits.build_ir) return;
    // A tiny GPT on two nodes (one when the topology has no network), at most 8 devices each.
    const bool multi = t.network.kind != NetworkKind::none && t.node.nics_per_node > 0;
    const int64_t nodes = multi ? 2 : 1;
    const int64_t dpn = std::min<int64_t>(t.node.devices_per_node, 8);
    write_file(scn, "[model]\npreset = \"tiny\"\nnum_layers = 2\n"
                    "[training]\nprecision = \"fp32\"\nglobal_batch_size = " +
                        std::to_string(2 * nodes * dpn) +
                        "\n[parallel]\ntensor = 1\n[cluster]\ntopology = \"topo.toml\"\nnodes = " +
                        std::to_string(nodes) + "\ndevices_per_node = " + std::to_string(dpn) + "\n");
    const Scenario s = load_scenario(scn);
    push_further(s, limits, out);
  });
}

fs::path scratch_dir(const std::string& tag) {
  const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
  const fs::path d = base / ("paralab-" + tag + "-" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

const char* to_string(Outcome::Kind k) {
  switch (k) {
    case Outcome::Kind::rejected: return "rejected";
    case Outcome::Kind::accepted: return "accepted";
    case Outcome::Kind::bug: return "bug";
  }
  return "?";
}

int fuzz_one(Target target, const uint8_t* data, size_t size) {
  const bool scenario = target == Target::scenario;
  // One scratch directory per target and process, created on first use and removed at exit
  // (libFuzzer ends with exit(); static destructors run).
  struct Scratch {
    fs::path dir;
    explicit Scratch(const char* tag) : dir(scratch_dir(tag)) {}
    ~Scratch() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  };
  static const Scratch scenario_dir("fuzz-scenario"), topology_dir("fuzz-topology");
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const Outcome out = scenario ? run_scenario_input(text, scenario_dir.dir) : run_topology_input(text, topology_dir.dir);
  if (out.kind == Outcome::Kind::bug) {
    std::fprintf(stderr, "paralab fuzz (%s): BUG: %s\n", scenario ? "scenario" : "topology", out.detail.c_str());
    std::abort();
  }
  return 0;
}

}  // namespace paralab::fuzz
