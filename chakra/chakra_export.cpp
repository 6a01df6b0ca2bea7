// paralab — StepIR + simulation -> Chakra execution traces (chakra_export.hpp).
#include "chakra/chakra_export.hpp"

#include <algorithm>
#include <cmath>

#include "chakra/attributes.hpp"
#include "chakra/delimited_stream.hpp"
#include "chakra/node_table.hpp"
#include "chakra/process_groups.hpp"
#include "ir/error.hpp"

namespace paralab::chakra {

namespace {

namespace et = paralab::chakra_et;

using Timings = std::vector<const OpTiming*>;  // by op id, the stage representative's

std::vector<Timings> stage_timings(const StepIR& ir, const sim::Simulation& sim) {
  if (sim.per_rank) throw InternalError("export_chakra: needs a simulation in representative mode, not per-rank");
  std::vector<Timings> out(ir.stages.size());
  for (size_t s = 0; s < ir.stages.size(); ++s) out[s].assign(ir.stages[s].ops.size(), nullptr);
  for (const OpTiming& t : sim.result.ops) {
    const int64_t s = ir.layout.stage_of(t.rank);
    if (t.rank == ir.layout.representative(s) && t.op < out[static_cast<size_t>(s)].size())
      out[static_cast<size_t>(s)][t.op] = &t;
  }
  for (size_t s = 0; s < out.size(); ++s)
    for (size_t i = 0; i < out[s].size(); ++i)
      if (!out[s][i])
        throw InternalError("export_chakra: op " + ir.stages[s].ops[i].full_name() + " of stage " +
                            std::to_string(s) + " was not simulated");
  return out;
}

struct RankContext {
  const StepIR& ir;
  const StepGraph& g;
  const Timings& times;
  int64_t rank;
  std::vector<uint64_t> extra;  // a ring shift's receive node id, by op id (0: none)
  std::vector<OpId> prev;       // the op before it on its stream (kNoOp: first)
};

RankContext context(const StepIR& ir, const Timings& times, int64_t rank) {
  const StepGraph& g = ir.graph_for(rank);
  RankContext c{ir, g, times, rank, std::vector<uint64_t>(g.ops.size(), 0), std::vector<OpId>(g.ops.size(), kNoOp)};
  uint64_t next = g.ops.size();
  for (const Op& op : g.ops)
    if (op.kind == OpKind::sendrecv) c.extra[op.id] = next++;
  for (const auto& stream : g.streams)
    for (size_t i = 1; i < stream.size(); ++i) c.prev[stream[i]] = stream[i - 1];
  return c;
}

// Adds op `d` to a dependency list, and a ring shift's second node with it.
void add_dep(const RankContext& c, OpId d, google::protobuf::RepeatedField<uint64_t>& deps) {
  deps.Add(d);
  if (c.extra[d]) deps.Add(c.extra[d]);
}

et::Node base_node(const RankContext& c, const Op& op) {
  et::Node n;
  n.set_id(op.id);
  n.set_name(op.full_name());
  for (OpId d : op.deps) add_dep(c, d, *n.mutable_data_deps());
  if (c.prev[op.id] != kNoOp) add_dep(c, c.prev[op.id], *n.mutable_ctrl_deps());
  const OpTiming& t = *c.times[op.id];
  const double d = t.end_us - t.start_us;
  n.set_start_time_micros(static_cast<uint64_t>(std::llround(std::max(0.0, t.start_us))));
  n.set_duration_micros(static_cast<uint64_t>(std::llround(std::max(0.0, d))));
  add_bool(*n.mutable_attr(), "is_cpu_op", false);
  add_string(*n.mutable_attr(), "paralab_kind", std::string(to_string(op.kind)));
  return n;
}

void transfer_attrs(et::Node& n, int64_t src, int64_t dst, const P2PAttrs& p) {
  add_int32(*n.mutable_attr(), "comm_src", static_cast<int32_t>(src));
  add_int32(*n.mutable_attr(), "comm_dst", static_cast<int32_t>(dst));
  add_int64(*n.mutable_attr(), "comm_size", p.bytes);
  add_int32(*n.mutable_attr(), "comm_tag", static_cast<int32_t>(p.tag));
}

// The node(s) of one op: compute, collective, send, receive, or a ring shift's send + receive.
std::vector<et::Node> op_nodes(const RankContext& c, const Op& op, ProcessGroups& groups) {
  et::Node n = base_node(c, op);
  const EtNodeType type = node_type_of(op.kind);
  n.set_type(static_cast<et::NodeType>(type));
  auto& a = *n.mutable_attr();
  if (type == EtNodeType::comp) {
    const OpTiming& t = *c.times[op.id];
    add_double(a, kExactDurationAttr, t.end_us - t.start_us);
    add_int64(a, "num_ops", static_cast<int64_t>(std::llround(op.flops)));
    add_uint64(a, "tensor_size", static_cast<uint64_t>(std::llround(op.bytes)));
    return {n};
  }
  if (const CollectiveAttrs* col = op.collective()) {
    add_int64(a, "comm_type", static_cast<int64_t>(coll_type_of(col->kind)));
    add_int64(a, "comm_size", col->bytes);
    add_string(a, "pg_name", groups.name_of(c.ir.group_of(c.rank, op)));
    return {n};
  }
  const P2PAttrs& p = *op.p2p();
  if (op.kind == OpKind::recv) {
    transfer_attrs(n, c.ir.peer_of(c.rank, op, false), c.rank, p);
    return {n};
  }
  transfer_attrs(n, c.rank, c.ir.peer_of(c.rank, op, true), p);
  if (op.kind != OpKind::sendrecv) return {n};
  et::Node r = n;  // the ring shift's receive: same dependencies, its own id
  r.set_id(c.extra[op.id]);
  r.set_name(op.full_name() + ".recv");
  r.set_type(et::COMM_RECV_NODE);
  r.clear_attr();
  add_bool(*r.mutable_attr(), "is_cpu_op", false);
  add_string(*r.mutable_attr(), "paralab_kind", std::string(to_string(op.kind)));
  transfer_attrs(r, c.ir.peer_of(c.rank, op, false), c.rank, p);
  return {n, r};
}

et::GlobalMetadata metadata(const StepIR& ir, int64_t rank) {
  et::GlobalMetadata m;
  m.set_version(kSchemaVersion);
  auto& a = *m.mutable_attr();
  add_string(a, "paralab_scenario", ir.scenario.name);
  add_string(a, "paralab_topology", ir.scenario.topology.file.string());
  add_string(a, "paralab_topology_name", ir.scenario.topology.name);
  add_int64(a, "devices_per_node", ir.layout.devices_per_node());
  add_int64(a, "world_size", ir.layout.world());
  add_int64(a, "rank", rank);
  return m;
}

}  // namespace

ChakraExport export_chakra(const StepIR& ir, const sim::Simulation& sim, const std::string& prefix) {
  const std::vector<Timings> times = stage_timings(ir, sim);
  ChakraExport out;
  ProcessGroups groups;
  for (int64_t r = 0; r < ir.layout.world(); ++r) {
    const RankContext c = context(ir, times[static_cast<size_t>(ir.layout.stage_of(r))], r);
    TraceFile f{prefix + "." + std::to_string(r) + ".et", {}};
    append_delimited(metadata(ir, r), f.content);
    for (const Op& op : c.g.ops)
      for (const et::Node& n : op_nodes(c, op, groups)) {
        ++out.nodes_by_type[static_cast<size_t>(n.type())];
        append_delimited(n, f.content);
      }
    out.files.push_back(std::move(f));
  }
  out.groups = static_cast<int64_t>(groups.groups().size());
  out.files.push_back(TraceFile{kCommGroupFile, groups.json()});
  return out;
}

}  // namespace paralab::chakra
