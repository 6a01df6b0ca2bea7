// paralab — libFuzzer target: topology files through load_topology; an accepted topology
// then carries a small fixed scenario through build_step_ir and the simulator (invariant
// checks on), so the network builder and the flow model see fuzzed hardware.
// Any outcome but a clear ConfigError or an accepted topology aborts (fuzz/harness.hpp).
#include <cstddef>
#include <cstdint>

#include "fuzz/harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return paralab::fuzz::fuzz_one(paralab::fuzz::Target::topology, data, size);
}
