// paralab — reads a folder of Chakra execution traces (<prefix>.<rank>.et, one per rank, and
// ASTRA-sim's comm_group.json when their collectives name process groups) into the plain
// structs the trace replay simulates (sim/replay/trace.hpp). Protobuf stays in this target.
#pragma once

#include <filesystem>

#include "sim/replay/trace.hpp"

namespace paralab::chakra {

// Throws sim::replay::TraceError naming the file (and node) for: no traces, several prefixes,
// a missing rank, a truncated or malformed message, an unknown node type, a collective type
// sim/net has no model of, a communication node without its size or peer, a dependency on an
// unknown node, a dependency cycle (check_trace_set).
sim::replay::TraceSet read_chakra(const std::filesystem::path& dir);

}  // namespace paralab::chakra
