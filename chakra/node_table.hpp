// paralab — how paralab's op kinds and collectives map onto Chakra's node types and collective
// types, as tables (chakra/node_table.cpp), read in both directions.
#pragma once

#include <optional>
#include <string_view>

#include "ir/op_kind.hpp"
#include "ir/step_graph.hpp"
#include "sim/net/comm.hpp"

namespace paralab::chakra {

// Chakra's NodeType values (their schema's enum; chakra/et_def.proto).
enum class EtNodeType : int { invalid = 0, metadata = 1, mem_load = 2, mem_store = 3, comp = 4, send = 5, recv = 6, coll = 7 };
// Chakra's CollectiveCommType values.
enum class EtCollType : int {
  all_reduce = 0, reduce = 1, all_gather = 2, gather = 3, scatter = 4, broadcast = 5, all_to_all = 6,
  reduce_scatter = 7, reduce_scatter_block = 8, barrier = 9
};

// The node type of an op kind. `sendrecv` (a context-parallel ring shift) is written as two
// nodes, a send and a receive: its row says `send`, and the exporter adds the receive.
EtNodeType node_type_of(OpKind k);
std::string_view to_string(EtNodeType t);

// paralab's collective -> Chakra's comm_type.
EtCollType coll_type_of(paralab::CollKind k);
// Chakra's comm_type -> the network model's collective; nothing for types sim/net has no model
// of (REDUCE, GATHER, SCATTER). BARRIER is an all-reduce of 0 bytes (a synchronization).
std::optional<sim::CollKind> net_coll_of(int64_t comm_type);
std::string_view coll_type_name(int64_t comm_type);

}  // namespace paralab::chakra
