// paralab — `paralab export chakra`: one Chakra execution trace per rank of a scenario's step,
// from its StepIR and its simulation (docs/interop.md, "Chakra").
//
//   const StepIR ir = build_step_ir(scenario);
//   const sim::Simulation s = sim::simulate(ir);
//   for (const auto& f : chakra::export_chakra(ir, s).files) write(dir / f.name, f.content);
//
// Files: <prefix>.<rank>.et (GlobalMetadata, then a Node per op) and comm_group.json (the
// process groups their collectives name). Nodes: op kinds through chakra/node_table.hpp; node
// id = op id (a ring shift's receive: ops.size() + k); data_deps = Op::deps, ctrl_deps = the op
// before it on its stream; compute nodes carry the simulated duration (duration_micros, whole
// microseconds, and exactly in "paralab_duration_us"), num_ops (FLOPs) and tensor_size (bytes).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "ir/step_ir.hpp"
#include "sim/simulate.hpp"

namespace paralab::chakra {

// The exact simulated duration (us, a double); Chakra's duration_micros is an integer.
inline constexpr const char* kExactDurationAttr = "paralab_duration_us";
inline constexpr const char* kSchemaVersion = "0.0.4";  // what ASTRA-sim's example traces carry

struct TraceFile {
  std::string name;     // relative to the output folder
  std::string content;  // bytes
};

struct ChakraExport {
  std::vector<TraceFile> files;      // every rank's trace, then comm_group.json
  std::array<int64_t, 8> nodes_by_type{};  // by Chakra NodeType value
  int64_t groups = 0;
};

// Every rank of the layout gets its stage's graph with its own groups and peers and the
// durations its stage's representative was simulated with (`sim` from simulate(ir) without
// per-rank mode: sim.per_rank must be false). Throws InternalError when an op has no timing.
ChakraExport export_chakra(const StepIR& ir, const sim::Simulation& sim, const std::string& prefix = "paralab");

}  // namespace paralab::chakra
