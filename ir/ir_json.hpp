// paralab — the IR as JSON (`paralab inspect --dump-ir FILE`), streamed so that IRs of
// hundreds of thousands of ops do not need a document in memory. Format: docs/ir.md.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>

#include "ir/step_ir.hpp"

namespace paralab {

// Every stage graph (each standing for all ranks of its stage), or with `rank` just that
// rank's graph with its concrete group members and pipeline peers.
void write_ir_json(std::ostream& out, const StepIR& ir, std::optional<int64_t> rank = std::nullopt);

}  // namespace paralab
