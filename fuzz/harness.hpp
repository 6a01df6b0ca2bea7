// paralab — the fuzzing harness shared by the libFuzzer targets (fuzz/fuzz_*.cpp) and the
// regression tests that replay fixed crash inputs (tests/hardening/).
//
// Policy (docs/hardening.md): bad input must end in a paralab::ConfigError whose message names
// the file and a line or a key; anything else that escapes (another exception type, an
// unclear ConfigError, an InternalError from the IR generator or the simulator on an accepted
// scenario) is a bug. Crashes, hangs and sanitizer reports are bugs the fuzzer catches itself.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace paralab {
class ConfigError;
}

namespace paralab::fuzz {

// How far an accepted scenario is pushed: IR generation and simulation run only on small
// ones, so one iteration stays in the milliseconds. Model dimensions (hidden, sequence,
// vocabulary) are not capped: they change numbers, not the number of ops.
struct Limits {
  bool build_ir = true;
  bool simulate = true;
  int64_t max_world = 256;               // tensor * pipeline * context * data
  int64_t max_layers_x_microbatches = 64;
  int64_t max_pipeline_chunks = 16;      // pipeline * virtual_pipeline_stages
  int64_t max_sim_ops = 4000;            // ops over all stage graphs
};

struct Outcome {
  enum class Kind { rejected, accepted, bug };
  Kind kind = Kind::rejected;
  std::string detail;      // the error message (rejected) or what went wrong (bug)
  bool built_ir = false;
  bool simulated = false;
};

// A scenario input: scenario TOML, optionally followed by a line "#@topology" and a topology
// TOML, which is written next to the scenario as topo.toml (the scenario then says
// topology = "topo.toml"; without the marker it names a shipped topology). `dir` is a
// scratch directory the harness owns (files in it are overwritten).
Outcome run_scenario_input(std::string_view data, const std::filesystem::path& dir,
                           const Limits& limits = {});

// A topology input: loaded alone; when accepted, a small fixed scenario on it is loaded and,
// within the limits, its IR built and simulated (so the network builder sees fuzzed
// hardware too).
Outcome run_topology_input(std::string_view data, const std::filesystem::path& dir,
                           const Limits& limits = {});

// Empty when `e` is a clear error (names a file, and a line or a key, and says what is
// wrong); otherwise what is missing.
std::string unclear_error(const ConfigError& e);

// A fresh scratch directory for this process (under /dev/shm when it exists: tmpfs).
std::filesystem::path scratch_dir(const std::string& tag);

const char* to_string(Outcome::Kind k);

// The body of a libFuzzer entry point: runs one input through the target's harness in this
// process's scratch directory (removed at exit) and aborts, naming the bug, on a bug outcome.
enum class Target { scenario, topology };
int fuzz_one(Target target, const uint8_t* data, size_t size);

}  // namespace paralab::fuzz
