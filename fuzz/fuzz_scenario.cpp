// paralab — libFuzzer target: scenario files (and, after a "#@topology" line, the topology
// file the scenario names as "topo.toml") through load_scenario, then, for small accepted
// scenarios, build_step_ir and the simulator with its invariant checks on.
// Any outcome but a clear ConfigError or an accepted scenario aborts (fuzz/harness.hpp).
#include <cstddef>
#include <cstdint>

#include "fuzz/harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return paralab::fuzz::fuzz_one(paralab::fuzz::Target::scenario, data, size);
}
