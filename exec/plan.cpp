// paralab exec — per-rank resolution of the IR: views, groups, peers, communicators, fills.
#include "exec/plan.hpp"

#include <algorithm>
#include <map>

#include "ir/error.hpp"

namespace paralab::exec {

uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t seed_key(std::initializer_list<uint64_t> parts) {
  uint64_t h = 0x243F6A8885A308D3ull;
  for (uint64_t p : parts) h = mix64(h ^ mix64(p));
  return h;
}

uint64_t hash_string(std::string_view s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

std::string CommKey::label() const {
  std::string out(to_string(group));
  out += p2p ? std::string("/p2p") : stream == Stream::kCount ? std::string("/base") : "/" + std::string(to_string(stream));
  return out;
}

std::string op_label(const Op& op) {
  return "'" + op.full_name() + "' (op " + std::to_string(op.id) + ", " + std::string(to_string(op.stream)) + ")";
}

bool accumulating_write(const Op& op, size_t w) {
  switch (op.kind) {
    case OpKind::gemm: {
      const GemmAttrs& g = *op.gemm();
      if (w == 0) return g.accumulate;
      return g.role == GemmRole::linear_wgrad;  // bias gradient, accumulated like the weight's
    }
    case OpKind::layernorm_bwd:
    case OpKind::rmsnorm_bwd: return w >= 1;  // dgamma, dbeta (writes[0] is the residual grad)
    case OpKind::dropout_add_bwd: return w == 1;  // d bias
    case OpKind::embedding_bwd: return true;      // d table, d positions (scatter-add)
    case OpKind::grad_norm:
    case OpKind::overflow_check: return true;  // partial sum of squares / any-inf flag
    default: return false;
  }
}

namespace {
bool shard_convention(const Op& op) {
  switch (op.kind) {
    case OpKind::optimizer_step:
    case OpKind::grad_norm:
    case OpKind::overflow_check: return true;
    case OpKind::collective: {
      const GroupKind g = op.collective()->group;
      return g == GroupKind::dp || g == GroupKind::embd || g == GroupKind::world || g == GroupKind::mp;
    }
    default: return false;
  }
}
}  // namespace

int64_t view_shift(const StepIR& ir, const StepGraph& g, const Op& op, const TensorRef& t, bool is_read,
                   int64_t rank) {
  if (const P2PAttrs* p = op.p2p(); p && p->slices > 1 && is_read && op.kind == OpKind::send)
    return ir.layout.coord(rank).tp * t.numel();
  if (!shard_convention(op)) return 0;
  const int64_t dp_size = ir.layout.group_size(GroupKind::dp);
  const Buffer& b = g.buffer(t.buffer);
  if (dp_size <= 1 || !b.resident || (b.category != MemCategory::weights && b.category != MemCategory::grads))
    return 0;
  if (t.offset != 0 || t.numel() * dp_size != b.elements) return 0;
  return ir.layout.index_in_group(GroupKind::dp, rank) * t.numel();
}

std::vector<CommKey> job_comms(const StepIR& ir) {
  std::vector<CommKey> out;
  auto add = [&](CommKey k) {
    if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  };
  for (int g = 0; g < static_cast<int>(GroupKind::kCount); ++g) add({static_cast<GroupKind>(g), Stream::kCount, false});
  for (const StepGraph& g : ir.stages)
    for (const Op& op : g.ops) {
      if (const auto* c = op.collective()) add({c->group, op.stream, false});
      else if (const auto* p = op.p2p()) add({p->group, Stream::compute, true});
    }
  std::sort(out.begin(), out.end(), [](const CommKey& a, const CommKey& b) {
    if (a.p2p != b.p2p) return a.p2p < b.p2p;
    if (a.group != b.group) return a.group < b.group;
    return a.stream < b.stream;
  });
  return out;
}

RankPlan plan_rank(const StepIR& ir, int64_t rank, bool poison) {
  RankPlan p;
  p.ir = &ir;
  p.graph = &ir.graph_for(rank);
  p.rank = rank;
  p.coord = ir.layout.coord(rank);
  p.dp_size = ir.layout.group_size(GroupKind::dp);
  p.dp_index = ir.layout.index_in_group(GroupKind::dp, rank);
  p.comms = job_comms(ir);
  const StepGraph& g = *p.graph;
  const Scenario& s = ir.scenario;
  const uint64_t seed = static_cast<uint64_t>(s.training.seed);

  auto comm_slot = [&](CommKey k) {
    for (size_t i = 0; i < p.comms.size(); ++i)
      if (p.comms[i] == k) return static_cast<int>(i);
    throw InternalError("plan_rank: communicator " + k.label() + " missing");
  };

  p.ops.resize(g.ops.size());
  for (const Op& op : g.ops) {
    OpPlan& o = p.ops[op.id];
    p.stream_used[static_cast<size_t>(op.stream)] = true;
    auto resolve = [&](const TensorRef& t, bool is_read) {
      const int64_t off = t.offset + view_shift(ir, g, op, t, is_read, rank);
      if (off < 0 || off + t.numel() > g.buffer(t.buffer).elements)
        throw InternalError("plan_rank: view of '" + g.buffer(t.buffer).name + "' in op " + op_label(op) +
                            " leaves the buffer after the rank's shard offset");
      return ResolvedRef{t.buffer, off, t.numel(), t.dtype};
    };
    for (const TensorRef& t : op.reads) o.reads.push_back(resolve(t, true));
    for (const TensorRef& t : op.writes) o.writes.push_back(resolve(t, false));
    for (size_t w = 0; w < op.writes.size(); ++w) o.accumulates.push_back(accumulating_write(op, w));
    if (const auto* c = op.collective()) {
      o.group = ir.group_of(rank, op);
      o.index = static_cast<int>(ir.layout.index_in_group(c->group, rank));
      o.comm = comm_slot({c->group, op.stream, false});
    } else if (const auto* t = op.p2p()) {
      o.group = ir.group_of(rank, op);
      o.index = static_cast<int>(ir.layout.index_in_group(t->group, rank));
      const int n = static_cast<int>(o.group.size());
      if (t->send_offset != 0) o.send_to = ((o.index + t->send_offset) % n + n) % n;
      if (t->recv_offset != 0) o.recv_from = ((o.index + t->recv_offset) % n + n) % n;
      o.comm = comm_slot({t->group, Stream::compute, true});
    }
  }

  // Buffer contents.
  const int64_t zero = s.parallel.zero_stage;
  const bool shard_opt = zero >= 1 && p.dp_size > 1, shard_weights = zero >= 3 && p.dp_size > 1;
  std::map<std::string, BufferId> by_name;
  for (BufferId b = 0; b < g.buffers.size(); ++b) by_name[g.buffers[b].name] = b;
  std::vector<OpId> first_use(g.buffers.size(), kNoOp);
  for (const Op& op : g.ops)
    for (BufferId b : op.allocs) first_use[b] = op.id;

  p.buffers.resize(g.buffers.size());
  for (BufferId b = 0; b < g.buffers.size(); ++b) {
    const Buffer& buf = g.buffers[b];
    BufferPlan& bp = p.buffers[b];
    const std::string& name = buf.name;
    const auto dot = name.rfind('.');
    const std::string prefix = dot == std::string::npos ? name : name.substr(0, dot);
    const std::string suffix = dot == std::string::npos ? "" : name.substr(dot + 1);
    if (buf.resident) {
      switch (buf.category) {
        case MemCategory::weights:
          bp.fill = Fill::weights;
          bp.key = seed_key({seed, hash_string("weights"), static_cast<uint64_t>(g.stage),
                             static_cast<uint64_t>(p.coord.tp), hash_string(prefix)});
          bp.global_offset = shard_weights ? p.dp_index * buf.elements : 0;
          break;
        case MemCategory::grads: bp.fill = Fill::zero; break;
        case MemCategory::optimizer:
          if (suffix == "master") {
            auto it = by_name.find(prefix + ".weights");
            if (it == by_name.end()) throw InternalError("plan_rank: no weights for '" + name + "'");
            const int64_t off = shard_opt && !shard_weights ? p.dp_index * buf.elements : 0;
            p.master_copies.push_back({b, it->second, off});
          } else {
            bp.fill = suffix == "exp_avg_sq" ? Fill::moment2 : Fill::moment1;
            bp.key = seed_key({seed, hash_string("optimizer"), static_cast<uint64_t>(g.stage),
                               static_cast<uint64_t>(p.coord.tp), hash_string(name)});
            bp.global_offset = shard_opt ? p.dp_index * buf.elements : 0;
          }
          break;
        default: bp.fill = Fill::zero; break;
      }
      continue;
    }
    const OpId first = first_use[b];
    bool read_first = false;
    if (first != kNoOp) {
      const Op& op = g.op(first);
      for (const TensorRef& t : op.reads) read_first |= t.buffer == b;
      for (size_t w = 0; w < op.writes.size(); ++w) read_first |= op.writes[w].buffer == b && accumulating_write(op, w);
    }
    if (read_first && buf.dtype == DType::i32) {
      bp.fill = Fill::token_ids;
      bp.key = seed_key({seed, hash_string("tokens"), static_cast<uint64_t>(p.coord.dp),
                         static_cast<uint64_t>(p.coord.cp), hash_string(name)});
      bp.vocab = s.model.vocab_size;
    } else if (read_first) {
      bp.fill = Fill::zero;
    } else {
      bp.fill = poison ? Fill::poison : Fill::none;
    }
  }

  // Norm gains live in the resident weights (not under ZeRO-3, where the gathered copy is read).
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::layernorm_fwd && op.kind != OpKind::rmsnorm_fwd) continue;
    const ResolvedRef& gamma = p.ops[op.id].reads.at(1);
    if (!g.buffer(gamma.buffer).resident) continue;
    bool seen = false;
    for (const ResolvedRef& r : p.norm_gammas) seen |= r.buffer == gamma.buffer && r.offset == gamma.offset;
    if (!seen) p.norm_gammas.push_back(gamma);
  }
  return p;
}

}  // namespace paralab::exec
