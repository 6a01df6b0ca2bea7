// paralab exec — per-rank resolution of the IR: views, groups, peers, communicators, fills.
#include "exec/plan.hpp"

#include <algorithm>
#include <map>

#include "exec/fill_math.hpp"
#include "exec/plan_params.hpp"
#include "ir/error.hpp"

namespace paralab::exec {

uint64_t mix64(uint64_t x) { return fillmath::mix64(x); }

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

double xent_grad_scale(const RankPlan& plan, const KernelAttrs& k, double loss_scale) {
  return loss_scale /
         (static_cast<double>(k.rows) * static_cast<double>(std::max<int64_t>(k.aux, 1)) * static_cast<double>(plan.dp_size));
}

std::pair<int64_t, int64_t> position_add_rows(const RankPlan& plan, int64_t T) {
  const ModelShape& m = plan.ir->shape;
  const int64_t b = std::max<int64_t>(m.micro_batch, 1), positions = T / b, n = std::max<int64_t>(m.tp, 1);
  const int64_t t = plan.coord.tp;
  return {positions * t / n * b, positions * (t + 1) / n * b};
}

// Under SP the sequence splits evenly over tp (validated), so this rank's share of whole
// positions is exactly its sequence slice.
std::pair<int64_t, int64_t> position_grad_rows(const RankPlan& plan, int64_t T) {
  return plan.ir->shape.sp ? position_add_rows(plan, T) : std::pair<int64_t, int64_t>{0, T};
}

AttentionDims attention_dims(const ModelShape& m, const AttentionAttrs& a) {
  const AttentionDims x{a.batch, a.heads, a.kv_heads, a.head_dim, a.sq, m.qkv_cols(), m.attn_cols()};
  if (x.al != m.heads_local() || x.gl != m.groups_local() || x.d != m.head_dim || x.s != m.seq_local())
    throw InternalError("attention: attributes do not match the model shape");
  return x;
}

CpSplit cp_split(const ModelShape& m, int64_t cp_index) {
  CpSplit c;
  c.cp = m.cp;
  c.index = cp_index;
  c.chunk = m.cp > 1 ? m.seq_local() / 2 : m.seq_local();
  if (m.cp > 1 && m.seq_local() % 2 != 0)
    throw InternalError("context parallelism: the local sequence (" + std::to_string(m.seq_local()) +
                        ") does not split into two chunks");
  if (cp_index < 0 || cp_index >= m.cp) throw InternalError("context parallelism: CP index out of range");
  return c;
}

std::vector<SeqPiece> seq_pieces(const ModelShape& m, int64_t cp_index) {
  const CpSplit split = cp_split(m, cp_index);
  const int64_t rows = split.chunk * m.micro_batch;
  std::vector<SeqPiece> out;
  for (int64_t h = 0; h < (split.cp > 1 ? 2 : 1); ++h) out.push_back({h * rows, rows, split.position(h * split.chunk)});
  return out;
}

RingBlocks ring_blocks(const CpSplit& cp, const AttentionAttrs& a) {
  RingBlocks r;
  r.halves = cp.cp > 1 ? 2 : 1;
  for (int hq = 0; hq < 2; ++hq)
    for (int hk = 0; hk < 2; ++hk)
      r.blk[hq][hk] = hq < r.halves && hk < r.halves ? attention_block(cp, a, hq, hk) : AttentionBlock::masked;
  return r;
}

AttentionBlock attention_block(const CpSplit& cp, const AttentionAttrs& a, int hq, int hk) {
  if (a.cp_size != cp.cp) throw InternalError("attention: the op's CP size is not the layout's");
  const int64_t src = ((cp.index - a.cp_step) % cp.cp + cp.cp) % cp.cp;  // whose KV arrives at this step
  const int64_t q = cp.chunk_of(cp.index, hq), k = cp.chunk_of(src, hk);
  return q == k ? AttentionBlock::causal : k < q ? AttentionBlock::full : AttentionBlock::masked;
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
      return g.accumulate;  // weight gradient, and the bias gradient (writes[1]) like it
    }
    case OpKind::layernorm_bwd:
    case OpKind::rmsnorm_bwd: return w >= 1;  // dgamma, dbeta (writes[0] is the residual grad)
    case OpKind::dropout_add_bwd: return w == 1;  // d bias
    case OpKind::embedding_bwd: return true;      // d table, d positions (scatter-add)
    case OpKind::grad_norm:
    case OpKind::overflow_check: return true;  // partial sum of squares / any-inf flag
    case OpKind::cast: return std::string_view(op.name) == "grad_accumulate" || std::string_view(op.name) == "dkv_accumulate";
    default: return false;
  }
}

namespace {
bool shard_convention(const Op& op) {
  switch (op.kind) {
    case OpKind::optimizer_step:
    case OpKind::copy:
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

namespace {
// Offload (ir/param_offload.cpp) splits a bucket's optimizer shard [0, n) into the host's
// [0, h) ("<bucket>.host.<state>") and the device's [h, n) ("<bucket>.<state>"): where this
// buffer's elements begin in the shard, and the shard's size.
struct ShardPart {
  std::string bucket;
  int64_t begin = 0, shard = 0;
};
ShardPart shard_part(const StepGraph& g, const std::map<std::string, BufferId>& by_name, const std::string& prefix,
                     const std::string& suffix, int64_t elements) {
  static const std::string kHost = ".host";
  const bool host = prefix.size() > kHost.size() && prefix.compare(prefix.size() - kHost.size(), kHost.size(), kHost) == 0;
  ShardPart part;
  part.bucket = host ? prefix.substr(0, prefix.size() - kHost.size()) : prefix;
  // The other part of the same state.
  auto other = by_name.find(host ? part.bucket + "." + suffix : part.bucket + kHost + "." + suffix);
  const int64_t rest = other == by_name.end() ? 0 : g.buffers[other->second].elements;
  part.begin = host ? 0 : rest;
  part.shard = elements + rest;
  return part;
}
}  // namespace

int64_t view_shift(const StepIR& ir, const StepGraph& g, const Op& op, const TensorRef& t, bool is_read,
                   int64_t rank) {
  if (const P2PAttrs* p = op.p2p(); p && p->slices > 1 && is_read && op.kind == OpKind::send)
    return ir.layout.coord(rank).tp * t.numel();
  if (!shard_convention(op)) return 0;
  const int64_t dp_size = ir.layout.group_size(GroupKind::dp);
  const Buffer& b = g.buffer(t.buffer);
  if (dp_size <= 1 || !b.resident || b.host || (b.category != MemCategory::weights && b.category != MemCategory::grads))
    return 0;
  // ZeRO-2 gradients and ZeRO-3 weights are stored as each rank's own shard: no shift.
  const int64_t zero = ir.scenario.parallel.zero_stage;
  if ((b.category == MemCategory::grads && zero >= 2) || (b.category == MemCategory::weights && zero >= 3)) return 0;
  // A view inside the first of dp equal shards is rank 0's part of its own shard (offload splits
  // a shard into a host and a device range); any other view is the whole buffer's.
  const int64_t shard = b.elements / dp_size;
  if (b.elements % dp_size != 0 || t.offset + t.numel() > shard) return 0;
  return ir.layout.index_in_group(GroupKind::dp, rank) * shard;
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

namespace {
// What each buffer of the rank holds before the step (BufferPlan): seeded weights and moments,
// master copies of the weights, token ids, zeros, or poison for the never-written.
void plan_buffers(RankPlan& p, const std::map<std::string, BufferId>& by_name, uint64_t seed, bool poison) {
  const StepIR& ir = *p.ir;
  const StepGraph& g = *p.graph;
  const Scenario& s = ir.scenario;
  const int64_t zero = s.parallel.zero_stage;
  const bool shard_opt = zero >= 1 && p.dp_size > 1, shard_weights = zero >= 3 && p.dp_size > 1;
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
          if (buf.host && suffix == "params") {  // offload's staging: the host step writes it
            bp.fill = Fill::zero;
            if (buf.dtype == DType::f32 && !is_mixed(s.training.precision)) {  // fp32: stepped in place
              const ShardPart part = shard_part(g, by_name, prefix, suffix, buf.elements);
              const BufferId w = by_name.at(part.bucket + ".weights");
              const int64_t n = shard_opt && !shard_weights ? g.buffers[w].elements / p.dp_size : 0;
              p.master_copies.push_back({b, w, p.dp_index * n});
            }
            break;
          }
          bp.fill = Fill::weights;
          bp.key = seed_key({seed, hash_string("weights"), static_cast<uint64_t>(g.stage),
                             static_cast<uint64_t>(p.coord.tp), hash_string(prefix)});
          bp.global_offset = shard_weights ? p.dp_index * buf.elements : 0;
          break;
        case MemCategory::grads: bp.fill = Fill::zero; break;
        case MemCategory::optimizer:
          if (suffix == "master") {
            const ShardPart part = shard_part(g, by_name, prefix, suffix, buf.elements);
            auto it = by_name.find(part.bucket + ".weights");
            if (it == by_name.end()) throw InternalError("plan_rank: no weights for '" + name + "'");
            const int64_t off = (shard_opt && !shard_weights ? p.dp_index * part.shard : 0) + part.begin;
            p.master_copies.push_back({b, it->second, off});
          } else {
            // Keyed by the bucket's state and its global position: an offloaded part starts as
            // the same part of the device's state would.
            const ShardPart part = shard_part(g, by_name, prefix, suffix, buf.elements);
            bp.fill = suffix == "exp_avg_sq" ? Fill::moment2 : Fill::moment1;
            bp.key = seed_key({seed, hash_string("optimizer"), static_cast<uint64_t>(g.stage),
                               static_cast<uint64_t>(p.coord.tp), hash_string(part.bucket + "." + suffix)});
            bp.global_offset = (shard_opt ? p.dp_index * part.shard : 0) + part.begin;
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
      // Token ids and labels: element (sample, position) of the global batch, so every layout
      // trains on the same data. Rows are (position, batch entry), so a micro-batch is a
      // contiguous range of the global [samples, positions] stream and a CP chunk a contiguous
      // range of its micro-batch: the index is affine in the row.
      bp.fill = Fill::token_ids;
      const std::string stream = name.substr(0, name.find('.'));  // "token_ids" | "labels"
      bp.key = seed_key({seed, hash_string("data"), hash_string(stream)});
      const int64_t mb = g.op(first).microbatch, batch = s.training.micro_batch_size, S = s.model.seq_length;
      // Under CP the rank's rows are its two chunks (seq_pieces): two affine pieces.
      const int64_t base = (p.coord.dp * s.num_microbatches() + std::max<int64_t>(mb, 0)) * S * batch;
      const std::vector<SeqPiece> pieces = seq_pieces(ir.shape, p.coord.cp);
      bp.global_offset = base + pieces[0].position * batch;
      if (pieces.size() > 1) {
        bp.split = pieces[1].row0;
        bp.second_offset = base + pieces[1].position * batch;
      }
      bp.vocab = s.model.vocab_size;
    } else if (read_first) {
      bp.fill = Fill::zero;
    } else {
      bp.fill = poison ? Fill::poison : Fill::none;
    }
  }

}

}  // namespace

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

  std::map<std::string, BufferId> by_name;
  for (BufferId b = 0; b < g.buffers.size(); ++b) by_name[g.buffers[b].name] = b;
  plan_buffers(p, by_name, seed, poison);
  add_param_regions(p, by_name, seed);
  return p;
}

}  // namespace paralab::exec
