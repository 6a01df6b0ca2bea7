// paralab exec/cuda — NCCL communicators of the job, per-op communicator and peers, pipeline
// transfer order, and the cross-stream wait plan (see comm_plan.hpp).
#include "exec/cuda/comm_plan.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <tuple>

#include "exec/error.hpp"
#include "ir/error.hpp"

namespace paralab::exec::cuda {

namespace {

struct EdgeKey {
  GroupKind group;
  int32_t offset;
  bool operator<(const EdgeKey& o) const { return std::tie(group, offset) < std::tie(o.group, o.offset); }
};

// Data-flow offset of a send or recv (-1 when the op is neither): sends at +d, receives from -d.
int32_t flow_offset(const Op& op) {
  const P2PAttrs* p = op.p2p();
  if (!p) return 0;
  if (op.kind == OpKind::send) return p->send_offset;
  if (op.kind == OpKind::recv) return -p->recv_offset;
  return 0;
}

int64_t wrap(int64_t i, int64_t n) { return ((i % n) + n) % n; }

}  // namespace

std::string CommSpec::label() const {
  if (kind == Kind::slot) return "slot " + std::to_string(slot);
  return std::string(to_string(group)) + "/edge" + (offset > 0 ? "+" : "") + std::to_string(offset) + " from " +
         std::to_string(sender);
}

std::vector<CommSpec> job_nccl_comms(const StepIR& ir) {
  std::vector<CommSpec> out;
  const std::vector<CommKey> slots = job_comms(ir);
  for (size_t i = 0; i < slots.size(); ++i) {
    CommSpec c;
    c.kind = CommSpec::Kind::slot;
    c.slot = static_cast<int>(i);
    c.group = slots[i].group;
    out.push_back(c);
  }
  std::map<EdgeKey, bool> edges;
  for (const StepGraph& g : ir.stages)
    for (const Op& op : g.ops)
      if ((op.kind == OpKind::send || op.kind == OpKind::recv) && flow_offset(op) != 0)
        edges[{op.p2p()->group, flow_offset(op)}] = true;
  for (const auto& [k, used] : edges) {
    const int64_t n = ir.layout.group_size(k.group);
    if (n < 2) throw InternalError("job_nccl_comms: a " + std::string(to_string(k.group)) + " transfer in a group of one");
    for (int64_t i = 0; i < n; ++i) {
      CommSpec c;
      c.kind = CommSpec::Kind::edge;
      c.group = k.group;
      c.offset = k.offset;
      c.sender = i;
      out.push_back(c);
    }
  }
  return out;
}

std::vector<int64_t> comm_members(const StepIR& ir, const CommSpec& spec, int64_t rank) {
  const std::vector<int64_t> g = ir.layout.members(spec.group, rank);
  const auto it = std::find(g.begin(), g.end(), rank);
  if (it == g.end()) return {};
  if (spec.kind == CommSpec::Kind::slot) return g;
  const int64_t n = static_cast<int64_t>(g.size()), me = it - g.begin();
  const int64_t recv = wrap(spec.sender + spec.offset, n);
  if (me != spec.sender && me != recv) return {};
  return {g[static_cast<size_t>(spec.sender)], g[static_cast<size_t>(recv)]};
}

std::vector<OpComm> plan_op_comms(const RankPlan& plan, const std::vector<CommSpec>& specs) {
  const StepGraph& g = *plan.graph;
  std::map<int, int> by_slot;
  std::map<std::tuple<GroupKind, int32_t, int64_t>, int> by_edge;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].kind == CommSpec::Kind::slot) by_slot[specs[i].slot] = static_cast<int>(i);
    else by_edge[{specs[i].group, specs[i].offset, specs[i].sender}] = static_cast<int>(i);
  }
  std::vector<OpComm> out(g.ops.size());
  for (const Op& op : g.ops) {
    const OpPlan& o = plan.ops[op.id];
    OpComm& c = out[op.id];
    if (op.kind == OpKind::collective || op.kind == OpKind::sendrecv) {
      const auto it = by_slot.find(o.comm);
      if (it == by_slot.end()) throw InternalError("plan_op_comms: op " + op_label(op) + " has no communicator slot");
      c.comm = it->second;
      c.send_peer = o.send_to;
      c.recv_peer = o.recv_from;
      continue;
    }
    if (op.kind != OpKind::send && op.kind != OpKind::recv) continue;
    const int32_t d = flow_offset(op);
    const int64_t sender = op.kind == OpKind::send ? o.index : o.recv_from;
    const auto it = by_edge.find({op.p2p()->group, d, sender});
    if (it == by_edge.end() || sender < 0) throw InternalError("plan_op_comms: op " + op_label(op) + " has no edge communicator");
    c.comm = it->second;
    if (op.kind == OpKind::send) c.send_peer = 1;  // the receiver is member 1 of the edge
    else c.recv_peer = 0;                          // the sender is member 0
  }
  return out;
}

void check_p2p_order(const StepIR& ir) {
  struct Transfer {
    int64_t bytes;
    uint32_t tag;
    int32_t slices;
    OpId id;
  };
  // The sends (or receives) of one edge in one graph, in stream order; all on one stream.
  auto sequence = [&](const StepGraph& g, GroupKind kind, OpKind which, int32_t d, int64_t rank) {
    std::vector<Transfer> seq;
    int stream = -1;
    for (int s = 0; s < kStreams; ++s)
      for (OpId id : g.streams[static_cast<size_t>(s)]) {
        const Op& op = g.op(id);
        if (op.kind != which || op.p2p()->group != kind || flow_offset(op) != d) continue;
        if (stream >= 0 && stream != s)
          throw ExecError(rank, std::string("the ") + (which == OpKind::send ? "sends" : "receives") + " of " +
                                    std::string(to_string(kind)) + " edge " + std::to_string(d) + " are issued from two " +
                                    "streams; the cuda backend needs one stream per edge and direction (op " +
                                    op_label(op) + ")");
        stream = s;
        seq.push_back({op.p2p()->bytes, op.p2p()->tag, op.p2p()->slices, id});
      }
    return seq;
  };
  // sendrecv ops of a group kind: one stream only (they share the group's p2p communicator).
  for (int k = 0; k < static_cast<int>(GroupKind::kCount); ++k) {
    int stream = -1;
    for (const StepGraph& g : ir.stages)
      for (const Op& op : g.ops)
        if (op.kind == OpKind::sendrecv && op.p2p()->group == static_cast<GroupKind>(k)) {
          if (stream >= 0 && stream != static_cast<int>(op.stream))
            throw ExecError(0, "sendrecv ops of the " + std::string(to_string(static_cast<GroupKind>(k))) +
                                   " group are issued from two streams; the cuda backend needs one (op " + op_label(op) + ")");
          stream = static_cast<int>(op.stream);
        }
  }
  for (const CommSpec& spec : job_nccl_comms(ir)) {
    if (spec.kind != CommSpec::Kind::edge) continue;
    const std::vector<int64_t> g0 = ir.layout.members(spec.group, 0);
    const auto n = static_cast<int64_t>(g0.size());
    const int64_t from = g0[static_cast<size_t>(spec.sender)], to = g0[static_cast<size_t>(wrap(spec.sender + spec.offset, n))];
    const auto sends = sequence(ir.graph_for(from), spec.group, OpKind::send, spec.offset, from);
    const auto recvs = sequence(ir.graph_for(to), spec.group, OpKind::recv, spec.offset, to);
    const std::string edge = std::string(to_string(spec.group)) + " transfers from rank " + std::to_string(from) +
                             " (position " + std::to_string(spec.sender) + ") to rank " + std::to_string(to) +
                             " (offset " + std::to_string(spec.offset) + ")";
    const size_t common = std::min(sends.size(), recvs.size());
    for (size_t i = 0; i < common; ++i) {
      const Transfer &s = sends[i], &r = recvs[i];
      if (s.bytes != r.bytes || s.tag != r.tag || s.slices != r.slices)
        throw ExecError(from, "the " + edge + " are issued in different orders: send #" + std::to_string(i) + " (op " +
                                  std::to_string(s.id) + ") has tag " + std::to_string(s.tag) + " and " +
                                  std::to_string(s.bytes) + " B, the receiver's receive #" + std::to_string(i) + " (op " +
                                  std::to_string(r.id) + ") tag " + std::to_string(r.tag) + " and " +
                                  std::to_string(r.bytes) + " B; NCCL matches the sends and receives of a communicator "
                                  "in issue order, so the cuda backend cannot run this IR");
    }
    if (sends.size() != recvs.size())
      throw ExecError(from, "the " + edge + " do not pair up: " + std::to_string(sends.size()) + " sends, " +
                                std::to_string(recvs.size()) + " receives");
  }
}

WaitPlan plan_waits(const StepGraph& g) {
  const size_t n = g.ops.size();
  std::vector<int64_t> pos(n, -1);
  for (int s = 0; s < kStreams; ++s) {
    const auto& v = g.streams[static_cast<size_t>(s)];
    for (size_t i = 0; i < v.size(); ++i) pos[v[i]] = static_cast<int64_t>(i);
  }
  using Frontier = std::array<int64_t, kStreams>;
  Frontier none;
  none.fill(-1);
  std::vector<Frontier> done(n, none);  // per op: the last position of each stream complete when it is
  std::array<OpId, kStreams> last{};
  last.fill(kNoOp);
  WaitPlan plan;
  plan.waits.resize(n);
  for (const Op& op : g.ops) {  // a topological order
    const auto s = static_cast<size_t>(op.stream);
    Frontier cur = last[s] == kNoOp ? none : done[last[s]];
    std::vector<OpId> deps = op.deps;
    std::sort(deps.rbegin(), deps.rend());
    for (OpId d : deps) {
      ++plan.ir_deps;
      const auto x = static_cast<size_t>(g.op(d).stream);
      if (x == s || pos[d] <= cur[x]) continue;  // implied by stream order or an earlier wait
      plan.waits[op.id].push_back(d);
      ++plan.kept;
      for (int t = 0; t < kStreams; ++t) cur[static_cast<size_t>(t)] = std::max(cur[static_cast<size_t>(t)], done[d][static_cast<size_t>(t)]);
    }
    cur[s] = pos[op.id];
    done[op.id] = cur;
    last[s] = op.id;
  }
  return plan;
}

}  // namespace paralab::exec::cuda
