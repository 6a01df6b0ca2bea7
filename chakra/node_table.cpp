// paralab — the op kind -> Chakra node type table and the collective type tables.
#include "chakra/node_table.hpp"

#include <array>

namespace paralab::chakra {

namespace {

struct KindRow {
  OpKind kind;
  EtNodeType type;
};

// Every op kind, in OpKind order (checked below): computation is COMP_NODE, collectives
// COMM_COLL_NODE, transfers COMM_SEND_NODE / COMM_RECV_NODE.
constexpr KindRow kKinds[] = {
    {OpKind::gemm, EtNodeType::comp},           {OpKind::attention_fwd, EtNodeType::comp},
    {OpKind::attention_bwd, EtNodeType::comp},  {OpKind::layernorm_fwd, EtNodeType::comp},
    {OpKind::layernorm_bwd, EtNodeType::comp},  {OpKind::rmsnorm_fwd, EtNodeType::comp},
    {OpKind::rmsnorm_bwd, EtNodeType::comp},    {OpKind::gelu_fwd, EtNodeType::comp},
    {OpKind::gelu_bwd, EtNodeType::comp},       {OpKind::swiglu_fwd, EtNodeType::comp},
    {OpKind::swiglu_bwd, EtNodeType::comp},     {OpKind::softmax_fwd, EtNodeType::comp},
    {OpKind::softmax_bwd, EtNodeType::comp},    {OpKind::dropout_fwd, EtNodeType::comp},
    {OpKind::dropout_bwd, EtNodeType::comp},    {OpKind::dropout_add_fwd, EtNodeType::comp},
    {OpKind::dropout_add_bwd, EtNodeType::comp}, {OpKind::rope_fwd, EtNodeType::comp},
    {OpKind::rope_bwd, EtNodeType::comp},       {OpKind::embedding_fwd, EtNodeType::comp},
    {OpKind::embedding_bwd, EtNodeType::comp},  {OpKind::xent_max, EtNodeType::comp},
    {OpKind::xent_sum, EtNodeType::comp},       {OpKind::xent_loss, EtNodeType::comp},
    {OpKind::xent_bwd, EtNodeType::comp},       {OpKind::cast, EtNodeType::comp},
    {OpKind::grad_norm, EtNodeType::comp},      {OpKind::overflow_check, EtNodeType::comp},
    {OpKind::scaler_update, EtNodeType::comp},  {OpKind::optimizer_step, EtNodeType::comp},
    {OpKind::copy, EtNodeType::comp},  // a host copy: a node of its duration on the rank
    {OpKind::launch, EtNodeType::comp},  // host launch time (nn.DataParallel): likewise
    {OpKind::collective, EtNodeType::coll},     {OpKind::send, EtNodeType::send},
    {OpKind::recv, EtNodeType::recv},           {OpKind::sendrecv, EtNodeType::send},
};
static_assert(std::size(kKinds) == static_cast<size_t>(OpKind::kCount), "a row per OpKind");
constexpr bool kinds_in_order() {
  for (size_t i = 0; i < std::size(kKinds); ++i)
    if (static_cast<size_t>(kKinds[i].kind) != i) return false;
  return true;
}
static_assert(kinds_in_order(), "rows in OpKind order");

struct CollRow {
  EtCollType type;
  const char* name;
  std::optional<sim::CollKind> net;  // the network model's collective, if it has one
};

constexpr std::array<CollRow, 10> kColls = {{
    {EtCollType::all_reduce, "ALL_REDUCE", sim::CollKind::all_reduce},
    {EtCollType::reduce, "REDUCE", std::nullopt},  // rootless in Chakra: the root is not recorded
    {EtCollType::all_gather, "ALL_GATHER", sim::CollKind::all_gather},
    {EtCollType::gather, "GATHER", std::nullopt},
    {EtCollType::scatter, "SCATTER", std::nullopt},
    {EtCollType::broadcast, "BROADCAST", sim::CollKind::broadcast},
    {EtCollType::all_to_all, "ALL_TO_ALL", sim::CollKind::all_to_all},
    {EtCollType::reduce_scatter, "REDUCE_SCATTER", sim::CollKind::reduce_scatter},
    {EtCollType::reduce_scatter_block, "REDUCE_SCATTER_BLOCK", sim::CollKind::reduce_scatter},
    {EtCollType::barrier, "BARRIER", sim::CollKind::all_reduce},
}};

// paralab's CollKind order: all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce,
// gather, scatter.
constexpr EtCollType kOurs[] = {EtCollType::all_reduce, EtCollType::all_gather, EtCollType::reduce_scatter,
                                EtCollType::all_to_all, EtCollType::broadcast,  EtCollType::reduce,
                                EtCollType::gather,     EtCollType::scatter};

}  // namespace

EtNodeType node_type_of(OpKind k) { return kKinds[static_cast<size_t>(k)].type; }

std::string_view to_string(EtNodeType t) {
  constexpr const char* names[] = {"INVALID_NODE", "METADATA_NODE", "MEM_LOAD_NODE",  "MEM_STORE_NODE",
                                   "COMP_NODE",    "COMM_SEND_NODE", "COMM_RECV_NODE", "COMM_COLL_NODE"};
  const auto i = static_cast<size_t>(t);
  return i < std::size(names) ? names[i] : "?";
}

EtCollType coll_type_of(paralab::CollKind k) { return kOurs[static_cast<size_t>(k)]; }

std::optional<sim::CollKind> net_coll_of(int64_t comm_type) {
  if (comm_type < 0 || comm_type >= static_cast<int64_t>(kColls.size())) return std::nullopt;
  return kColls[static_cast<size_t>(comm_type)].net;
}

std::string_view coll_type_name(int64_t comm_type) {
  if (comm_type < 0 || comm_type >= static_cast<int64_t>(kColls.size())) return "?";
  return kColls[static_cast<size_t>(comm_type)].name;
}

}  // namespace paralab::chakra
