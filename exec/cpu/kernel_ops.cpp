// paralab exec/cpu — the memory-bound ops of docs/ir.md ("Memory-bound kernels") on the CPU
// twins of kernels/: norms, activations, softmax, dropout, RoPE, embedding, the vocab-parallel
// cross-entropy stages, casts, the fp16 overflow check, the gradient norm, the optimizers and
// the loss-scale update. This file maps IR views (row layouts, [rows, 2] statistics, gradient
// outputs in the gradient dtype that accumulate over micro-batches) onto the kernels' arguments.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "exec/cpu/cpu_math.hpp"
#include "exec/plan.hpp"
#include "ir/error.hpp"
#include "kernels/adamw.hpp"
#include "kernels/cast.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/dropout.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gelu.hpp"
#include "kernels/l2norm.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/loss_scale.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/sgd.hpp"
#include "kernels/softmax.hpp"
#include "kernels/swiglu.hpp"

namespace paralab::exec::cpu {

void load_f32(const void* p, DType t, int64_t n, float* out) {
  switch (t) {
    case DType::f32: std::memcpy(out, p, static_cast<size_t>(n) * 4); return;
    case DType::bf16: {
      const auto* h = static_cast<const uint16_t*>(p);
      for (int64_t i = 0; i < n; ++i) out[i] = kernels::bf16_bits_to_f32(h[i]);
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i) out[i] = load(p, t, i);
  }
}

void store_f32(void* p, DType t, int64_t n, const float* in) {
  switch (t) {
    case DType::f32: std::memcpy(p, in, static_cast<size_t>(n) * 4); return;
    case DType::bf16: {
      auto* h = static_cast<uint16_t*>(p);
      for (int64_t i = 0; i < n; ++i) h[i] = kernels::f32_to_bf16_bits(in[i]);
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i) store(p, t, i, in[i]);
  }
}

void add_into(void* dst, DType t, int64_t n, const float* src, bool accumulate) {
  if (t == DType::f32) {
    auto* d = static_cast<float*>(dst);
    if (accumulate)
      for (int64_t i = 0; i < n; ++i) d[i] += src[i];
    else
      std::memcpy(d, src, static_cast<size_t>(n) * 4);
    return;
  }
  for (int64_t i = 0; i < n; ++i) store(dst, t, i, (accumulate ? load(dst, t, i) : 0.0f) + src[i]);
}

void expect_numel(const OpCall& call, bool read, size_t i, int64_t numel, const char* what) {
  const auto& refs = read ? call.plan.reads : call.plan.writes;
  if (i >= refs.size())
    throw InternalError("op " + op_label(call.op) + ": missing " + (read ? "read " : "write ") + std::to_string(i) +
                        " (" + what + ")");
  if (refs[i].numel != numel)
    throw InternalError("op " + op_label(call.op) + ": " + what + " has " + std::to_string(refs[i].numel) +
                        " elements, expected " + std::to_string(numel));
}

uint64_t dropout_seed(const Scenario& s, const Op& op, int64_t tp_index) {
  const bool attention_probs = std::string_view(op.name) == "attn_dropout" || std::string_view(op.name) == "attn_dropout_bwd";
  return seed_key({static_cast<uint64_t>(s.training.seed), hash_string("dropout"), static_cast<uint64_t>(op.layer + 1),
                   static_cast<uint64_t>(op.microbatch + 1), hash_string(op.name),
                   attention_probs ? static_cast<uint64_t>(tp_index) + 1 : 0});
}

namespace {

// A gradient output the kernels write in fp32 (dgamma, dbias, d table): the view itself when it
// is fp32, else an fp32 scratch added into the view (in its dtype) by commit().
class F32Grad {
 public:
  F32Grad(void* p, const ResolvedRef& r, float* scratch) : p_(p), r_(r), scratch_(scratch) {
    if (r_.dtype != DType::f32) std::fill(scratch_, scratch_ + r_.numel, 0.0f);
  }
  [[nodiscard]] float* ptr() const { return r_.dtype == DType::f32 ? static_cast<float*>(p_) : scratch_; }
  // The kernel's `accumulate` flag: straight into an fp32 view it accumulates, into the scratch not.
  [[nodiscard]] bool kernel_accumulates() const { return r_.dtype == DType::f32; }
  void commit() const {
    if (r_.dtype != DType::f32) add_into(p_, r_.dtype, r_.numel, scratch_, true);
  }

 private:
  void* p_;
  const ResolvedRef& r_;
  float* scratch_;
};

int64_t tp_index(const CpuContext& c) { return c.plan.coord.tp; }

void norm_fwd(const OpCall& call, CpuContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const auto& o = call.plan;
  expect_numel(call, true, 0, k.rows * k.cols, "x");
  expect_numel(call, false, 1, k.rows * 2, "stats");
  float* a = ctx.scratch.get(0, k.rows);
  float* b = ctx.scratch.get(1, k.rows);
  auto* stats = static_cast<float*>(call.writes[1]);
  if (call.op.kind == OpKind::layernorm_fwd) {
    kernels::LayerNormFwdArgs x;
    x.x = call.reads[0];
    x.gamma = call.reads[1];
    x.beta = call.reads.size() > 2 ? call.reads[2] : nullptr;
    x.y = call.writes[0];
    x.mean = a;
    x.rstd = b;
    x.rows = k.rows;
    x.cols = k.cols;
    x.eps = k.eps;
    x.dtype = kdtype(o.reads[0].dtype);
    kernels::layernorm_fwd_cpu(x);
  } else {
    kernels::RmsNormFwdArgs x;
    x.x = call.reads[0];
    x.gamma = call.reads[1];
    x.y = call.writes[0];
    x.rrms = b;
    x.rows = k.rows;
    x.cols = k.cols;
    x.eps = k.eps;
    x.dtype = kdtype(o.reads[0].dtype);
    kernels::rmsnorm_fwd_cpu(x);
    std::fill(a, a + k.rows, 0.0f);
  }
  for (int64_t r = 0; r < k.rows; ++r) {  // stats [rows, 2] = (mean, rstd) or (0, rrms)
    stats[2 * r] = a[r];
    stats[2 * r + 1] = b[r];
  }
}

// reads {dy, x, stats, gamma, [residual grad]}, writes {residual grad, dgamma, [dbeta]}.
void norm_bwd(const OpCall& call, CpuContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const auto& o = call.plan;
  const int64_t n = k.rows * k.cols;
  expect_numel(call, true, 0, n, "dy");
  expect_numel(call, true, 2, k.rows * 2, "stats");
  const DType dt = o.reads[0].dtype;
  const auto* stats = static_cast<const float*>(call.reads[2]);
  float* a = ctx.scratch.get(0, k.rows);
  float* b = ctx.scratch.get(1, k.rows);
  for (int64_t r = 0; r < k.rows; ++r) {
    a[r] = stats[2 * r];
    b[r] = stats[2 * r + 1];
  }
  // aux = 1: dx is added into the residual gradient; else it overwrites it.
  const bool add = k.aux == 1;
  void* dx = add ? static_cast<void*>(ctx.scratch.get(2, n)) : call.writes[0];
  const F32Grad dgamma(call.writes[1], o.writes[1], ctx.scratch.get(3, k.cols));
  if (call.op.kind == OpKind::layernorm_bwd) {
    std::optional<F32Grad> dbeta;
    if (call.writes.size() > 2) dbeta.emplace(call.writes[2], o.writes[2], ctx.scratch.get(4, k.cols));
    kernels::LayerNormBwdArgs x;
    x.dy = call.reads[0];
    x.x = call.reads[1];
    x.gamma = call.reads[3];
    x.mean = a;
    x.rstd = b;
    x.dx = dx;
    x.dgamma = dgamma.ptr();
    x.dbeta = dbeta ? dbeta->ptr() : nullptr;
    x.accumulate = dgamma.kernel_accumulates();
    x.rows = k.rows;
    x.cols = k.cols;
    x.dtype = kdtype(dt);
    kernels::layernorm_bwd_cpu(x);
    if (dbeta) dbeta->commit();
  } else {
    kernels::RmsNormBwdArgs x;
    x.dy = call.reads[0];
    x.x = call.reads[1];
    x.gamma = call.reads[3];
    x.rrms = b;
    x.dx = dx;
    x.dgamma = dgamma.ptr();
    x.accumulate = dgamma.kernel_accumulates();
    x.rows = k.rows;
    x.cols = k.cols;
    x.dtype = kdtype(dt);
    kernels::rmsnorm_bwd_cpu(x);
  }
  dgamma.commit();
  if (add) {
    void* res = call.writes[0];
    const DType rt = o.writes[0].dtype;
    for (int64_t i = 0; i < n; ++i) store(res, rt, i, load(res, rt, i) + load(dx, dt, i));
  }
}

void activation(const OpCall& call, CpuContext&) {
  const KernelAttrs& k = *call.op.kernel();
  const auto dt = kdtype(call.plan.reads[0].dtype);
  switch (call.op.kind) {
    case OpKind::gelu_fwd: {
      kernels::GeluFwdArgs x;
      x.x = call.reads[0];
      x.y = call.writes[0];
      x.rows = k.rows;
      x.cols = k.cols;
      x.dtype = dt;
      kernels::gelu_fwd_cpu(x);
      break;
    }
    case OpKind::gelu_bwd: {
      kernels::GeluBwdArgs x;
      x.dy = call.reads[0];
      x.x = call.reads[1];
      x.dx = call.writes[0];
      x.rows = k.rows;
      x.cols = k.cols;
      x.dtype = dt;
      kernels::gelu_bwd_cpu(x);
      break;
    }
    case OpKind::swiglu_fwd: {
      expect_numel(call, true, 0, k.rows * 2 * k.cols, "fc1 output");
      kernels::SwigluFwdArgs x;
      x.x = call.reads[0];
      x.y = call.writes[0];
      x.rows = k.rows;
      x.f = k.cols;
      x.dtype = dt;
      kernels::swiglu_fwd_cpu(x);
      break;
    }
    case OpKind::swiglu_bwd: {
      kernels::SwigluBwdArgs x;
      x.dy = call.reads[0];
      x.x = call.reads[1];
      x.dx = call.writes[0];
      x.rows = k.rows;
      x.f = k.cols;
      x.dtype = dt;
      kernels::swiglu_bwd_cpu(x);
      break;
    }
    default: break;
  }
}

void softmax(const OpCall& call, CpuContext&) {
  const KernelAttrs& k = *call.op.kernel();
  const int64_t s = k.cols, batches = k.rows / s;
  if (call.op.kind == OpKind::softmax_fwd) {
    kernels::SoftmaxFwdArgs x;
    x.x = call.reads[0];
    x.y = call.writes[0];
    x.batches = batches;
    x.sq = s;
    x.sk = s;
    x.scale = k.scale;
    x.causal = true;
    x.dtype = kdtype(call.plan.reads[0].dtype);
    kernels::scaled_masked_softmax_fwd_cpu(x);
  } else {
    kernels::SoftmaxBwdArgs x;
    x.dy = call.reads[0];
    x.y = call.reads[1];
    x.dx = call.writes[0];
    x.batches = batches;
    x.sq = s;
    x.sk = s;
    x.scale = k.scale;
    x.dtype = kdtype(call.plan.reads[0].dtype);
    kernels::scaled_masked_softmax_bwd_cpu(x);
  }
}

// Hidden-state dropouts in sequence-parallel regions draw the tensor-parallel rank's slice of
// the full tensor's mask (stream offset tp * n); attention-probability dropout has its own seed.
uint64_t dropout_offset(const CpuContext& ctx, const Op& op, int64_t n) {
  if (std::string_view(op.name) == "attn_dropout") return 0;
  return ctx.shape.sp ? static_cast<uint64_t>(tp_index(ctx) * n) : 0;
}

void dropout(const OpCall& call, CpuContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const int64_t n = k.rows * k.cols;
  const auto dt = kdtype(call.plan.reads[0].dtype);
  switch (call.op.kind) {
    case OpKind::dropout_fwd: {
      kernels::DropoutFwdArgs x;
      x.x = call.reads[0];
      x.y = call.writes[0];
      x.mask = call.writes.size() > 1 ? static_cast<uint8_t*>(call.writes[1]) : nullptr;
      x.n = n;
      x.p = k.p;
      x.seed = dropout_seed(ctx.scenario, call.op, tp_index(ctx));
      x.offset = dropout_offset(ctx, call.op, n);
      x.dtype = dt;
      kernels::dropout_fwd_cpu(x);
      break;
    }
    case OpKind::dropout_bwd: {
      kernels::DropoutBwdArgs x;
      x.dy = call.reads[0];
      x.mask = static_cast<const uint8_t*>(call.reads[1]);
      x.dx = call.writes[0];
      x.n = n;
      x.p = k.p;
      x.dtype = dt;
      kernels::dropout_bwd_cpu(x);
      break;
    }
    case OpKind::dropout_add_fwd: {
      kernels::DropoutAddFwdArgs x;
      x.x = call.reads[0];
      x.residual = call.reads[1];
      x.bias = call.reads.size() > 2 ? call.reads[2] : nullptr;
      x.out = call.writes[0];
      x.mask = call.writes.size() > 1 ? static_cast<uint8_t*>(call.writes[1]) : nullptr;
      x.rows = k.rows;
      x.cols = k.cols;
      x.p = k.p;
      x.seed = dropout_seed(ctx.scenario, call.op, tp_index(ctx));
      x.offset = dropout_offset(ctx, call.op, n);
      x.dtype = dt;
      kernels::dropout_add_fwd_cpu(x);
      break;
    }
    case OpKind::dropout_add_bwd: {
      std::optional<F32Grad> dbias;
      if (call.writes.size() > 1) dbias.emplace(call.writes[1], call.plan.writes[1], ctx.scratch.get(0, k.cols));
      kernels::DropoutAddBwdArgs x;
      x.dout = call.reads[0];
      x.mask = call.reads.size() > 1 ? static_cast<const uint8_t*>(call.reads[1]) : nullptr;
      x.dx = call.writes[0];
      x.dbias = dbias ? dbias->ptr() : nullptr;
      x.accumulate = dbias && dbias->kernel_accumulates();
      x.rows = k.rows;
      x.cols = k.cols;
      x.p = k.p;
      x.dtype = dt;
      kernels::dropout_add_bwd_cpu(x);
      if (dbias) dbias->commit();
      break;
    }
    default: break;
  }
}

// RoPE rotates the query heads and key groups of every qkv row (its first (a+g)/t * d columns).
void rope(const OpCall& call, CpuContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const ModelShape& m = ctx.shape;
  const int64_t T = k.rows, cols = k.cols, heads = m.heads_local() + m.groups_local(), d = m.head_dim;
  const int64_t w = heads * d;
  expect_numel(call, true, 0, T * cols, "qkv");
  const DType dt = call.plan.reads[0].dtype;
  float* buf = ctx.scratch.get(0, T * w);
  for (int64_t r = 0; r < T; ++r) load_f32(static_cast<const char*>(call.reads[0]) + r * cols * bytes_of(dt), dt, w, buf + r * w);
  kernels::RopeArgs x;
  x.x = buf;
  x.y = buf;
  x.rows = T;
  x.heads = heads;
  x.head_dim = d;
  x.batch = m.micro_batch;
  x.base = k.scale;
  x.dtype = kernels::Dtype::f32;
  // Positions: this CP rank's chunks of the sequence (seq_pieces), each a contiguous row range.
  if (k.aux != m.seq_local() || T != m.seq_local() * m.micro_batch)
    throw InternalError("rope: rows do not match the local sequence");
  for (const SeqPiece& p : seq_pieces(m, ctx.plan.coord.cp)) {
    x.x = x.y = buf + p.row0 * w;
    x.rows = p.rows;
    x.position_offset = p.position;
    if (call.op.kind == OpKind::rope_fwd) kernels::rope_fwd_cpu(x);
    else kernels::rope_bwd_cpu(x);
  }
  for (int64_t r = 0; r < T; ++r) store_f32(static_cast<char*>(call.writes[0]) + r * cols * bytes_of(dt), dt, w, buf + r * w);
}

void embedding(const OpCall& call, CpuContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const ModelShape& m = ctx.shape;
  const int64_t T = k.rows, h = k.cols, V = m.vocab_local(), b = m.micro_batch;
  const int64_t vstart = tp_index(ctx) * V;
  const CpSplit split = cp_split(m, ctx.plan.coord.cp);  // row r is local position r / b
  if (call.op.kind == OpKind::embedding_fwd) {
    expect_numel(call, true, 0, T, "token ids");
    expect_numel(call, true, 1, V * h, "word embedding table");
    const DType dt = call.plan.writes[0].dtype;
    kernels::EmbeddingFwdArgs x;
    x.ids = static_cast<const int32_t*>(call.reads[0]);
    x.table = call.reads[1];
    x.out = call.writes[0];
    x.rows = T;
    x.hidden = h;
    x.vocab_start = vstart;
    x.vocab_end = vstart + V;
    x.dtype = kdtype(dt);
    kernels::embedding_fwd_cpu(x);
    // Learned positions, each added once over tensor parallelism (the partial sums are
    // all-reduced): this rank's share of the positions, a row at a time in fp32.
    if (call.reads.size() > 2) {
      const DType pt = call.plan.reads[2].dtype;
      const auto [r0, r1] = position_add_rows(ctx.plan, T);
      float* row = ctx.scratch.get(0, h);
      for (int64_t r = r0; r < r1; ++r) {
        load_f32(static_cast<const char*>(call.reads[2]) + split.position(r / b) * h * bytes_of(pt), pt, h, row);
        add_into(static_cast<char*>(call.writes[0]) + r * h * bytes_of(dt), dt, h, row, true);
      }
    }
    return;
  }
  // Backward: scatter-add into the table gradient (and the position table's).
  expect_numel(call, true, 0, T * h, "embedding gradient");
  const F32Grad dtable(call.writes[0], call.plan.writes[0], ctx.scratch.get(0, V * h));
  kernels::EmbeddingBwdArgs x;
  x.ids = static_cast<const int32_t*>(call.reads[1]);
  x.dout = call.reads[0];
  x.dtable = dtable.ptr();
  x.accumulate = true;  // an fp32 view accumulates; the scratch was zeroed
  x.rows = T;
  x.hidden = h;
  x.vocab_start = vstart;
  x.vocab_end = vstart + V;
  x.dtype = kdtype(call.plan.reads[0].dtype);
  kernels::embedding_bwd_cpu(x);
  dtable.commit();
  if (call.writes.size() > 1) {
    const F32Grad dpos(call.writes[1], call.plan.writes[1], ctx.scratch.get(1, call.plan.writes[1].numel));
    float* g = dpos.ptr();
    const DType dt = call.plan.reads[0].dtype;
    // The position table is replicated over tensor parallelism. Under sequence parallelism its
    // gradient, like every replicated parameter's, is this rank's sequence slice's share, summed
    // by the IR's replicated-gradient all-reduce; without it every rank has the whole gradient.
    const auto [r0, r1] = position_grad_rows(ctx.plan, T);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t pos = split.position(r / b);
      for (int64_t c = 0; c < h; ++c) g[pos * h + c] += load(call.reads[0], dt, r * h + c);
    }
    dpos.commit();
  }
}

void cross_entropy(const OpCall& call, CpuContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const int64_t T = k.rows, V = k.cols, vstart = tp_index(ctx) * ctx.shape.vocab_local();
  switch (call.op.kind) {
    case OpKind::xent_max: {
      kernels::CeMaxArgs x;
      x.logits = call.reads[0];
      x.row_max = static_cast<float*>(call.writes[0]);
      x.rows = T;
      x.vocab = V;
      x.dtype = kdtype(call.plan.reads[0].dtype);
      kernels::ce_local_max_cpu(x);
      break;
    }
    case OpKind::xent_sum: {  // exp(logit - max) kept for the backward pass; (sum, target logit)
      const DType dt = call.plan.reads[0].dtype;
      const auto* mx = static_cast<const float*>(call.reads[1]);
      const auto* labels = static_cast<const int32_t*>(call.reads[2]);
      auto* ex = static_cast<float*>(call.writes[0]);
      auto* sums = static_cast<float*>(call.writes[1]);
      float* row = ctx.scratch.get(0, V);
      for (int64_t r = 0; r < T; ++r) {
        load_f32(static_cast<const char*>(call.reads[0]) + r * V * bytes_of(dt), dt, V, row);
        double s = 0;
        for (int64_t v = 0; v < V; ++v) {
          const float e = std::exp(row[v] - mx[r]);
          ex[r * V + v] = e;
          s += e;
        }
        const int64_t local = labels[r] - vstart;
        sums[2 * r] = static_cast<float>(s);
        sums[2 * r + 1] = local >= 0 && local < V ? row[local] : 0.0f;
      }
      break;
    }
    case OpKind::xent_loss: {
      const auto* sums = static_cast<const float*>(call.reads[0]);
      float* s = ctx.scratch.get(0, T);
      float* t = ctx.scratch.get(1, T);
      for (int64_t r = 0; r < T; ++r) {
        s[r] = sums[2 * r];
        t[r] = sums[2 * r + 1];
      }
      kernels::CeLossArgs x;
      x.row_max = static_cast<const float*>(call.reads[1]);
      x.sum_exp = s;
      x.target_logit = t;
      x.loss = static_cast<float*>(call.writes[0]);
      x.rows = T;
      kernels::ce_loss_cpu(x);
      break;
    }
    case OpKind::xent_bwd: {  // (softmax - onehot) * scale / (T * micro-batches * dp group)
      const auto* ex = static_cast<const float*>(call.reads[0]);
      const auto* sums = static_cast<const float*>(call.reads[1]);
      const auto* labels = static_cast<const int32_t*>(call.reads[2]);
      const DType dt = call.plan.writes[0].dtype;
      const float g = static_cast<float>(xent_grad_scale(ctx.plan, k));
      float* row = ctx.scratch.get(0, V);
      for (int64_t r = 0; r < T; ++r) {
        const float inv = 1.0f / sums[2 * r];
        for (int64_t v = 0; v < V; ++v) row[v] = ex[r * V + v] * inv;
        const int64_t local = labels[r] - vstart;
        if (local >= 0 && local < V) row[local] -= 1.0f;
        for (int64_t v = 0; v < V; ++v) row[v] *= g;
        store_f32(static_cast<char*>(call.writes[0]) + r * V * bytes_of(dt), dt, V, row);
      }
      break;
    }
    default: break;
  }
}

void cast(const OpCall& call, CpuContext& ctx) {
  const ModelShape& m = ctx.shape;
  if (std::string_view(call.op.name) == "dkv_accumulate") {
    // The KV block's gradient, home from its trip round the CP ring, into d_qkv's K and V columns.
    const KernelAttrs& k = *call.op.kernel();
    const int64_t T = k.rows, kv = k.cols, qkv_cols = m.qkv_cols(), q = m.attn_cols();
    const DType st = call.plan.reads[0].dtype, dt = call.plan.writes[0].dtype;
    for (int64_t r = 0; r < T; ++r)
      for (int64_t c = 0; c < kv; ++c) {
        const int64_t i = r * qkv_cols + q + c;
        store(call.writes[0], dt, i, load(call.writes[0], dt, i) + load(call.reads[0], st, r * kv + c));
      }
    return;
  }
  if (std::string_view(call.op.name) == "grad_accumulate") {
    // No gradient-accumulation fusion: the fresh gradient of a wgrad GEMM is added into the
    // parameter's view of the gradient buffer (Megatron's param.main_grad.add_(param.grad)).
    const int64_t n = call.plan.writes[0].numel;
    expect_numel(call, true, 0, n, "fresh gradient");
    float* f = ctx.scratch.get(0, n);
    load_f32(call.reads[0], call.plan.reads[0].dtype, n, f);
    add_into(call.writes[0], call.plan.writes[0].dtype, n, f, true);
    return;
  }
  kernels::CastArgs x;
  x.src = call.reads[0];
  x.src_dtype = kdtype(call.plan.reads[0].dtype);
  x.dst = call.writes[0];
  x.dst_dtype = kdtype(call.plan.writes[0].dtype);
  x.n = std::min(call.plan.reads[0].numel, call.plan.writes[0].numel);
  kernels::cast_cpu(x);
}

void optimizer(const OpCall& call, CpuContext& ctx) {
  const Scenario& s = ctx.scenario;
  const TrainingConfig& t = s.training;
  const bool mixed = is_mixed(t.precision), adam = t.optimizer == Optimizer::adam;
  const bool fp16 = t.precision == Precision::fp16, clip = t.clip_grad > 0;
  const auto& o = call.plan;
  const int64_t n = o.reads[0].numel;
  const size_t want_reads = 2 + mixed + adam + fp16 + clip, want_writes = 2 + mixed + adam;
  if (o.reads.size() != want_reads || o.writes.size() != want_writes)
    throw InternalError("op " + op_label(call.op) + ": optimizer has " + std::to_string(o.reads.size()) + " reads and " +
                        std::to_string(o.writes.size()) + " writes, expected " + std::to_string(want_reads) + " and " +
                        std::to_string(want_writes));
  for (size_t w = 0; w < o.writes.size(); ++w)
    if (o.writes[w].numel != n) throw InternalError("op " + op_label(call.op) + ": optimizer views differ in size");
  size_t wi = 1;
  float* master = mixed ? static_cast<float*>(call.writes[wi++]) : static_cast<float*>(call.writes[0]);
  if (!mixed && o.writes[0].dtype != DType::f32)
    throw InternalError("op " + op_label(call.op) + ": fp32 training with non-fp32 weights");
  float* s1 = static_cast<float*>(call.writes[wi++]);
  float* s2 = adam ? static_cast<float*>(call.writes[wi++]) : nullptr;
  size_t ri = 2 + mixed + adam;
  int32_t found = 0;
  if (fp16) found = static_cast<const float*>(call.reads[ri++])[0] > 0 ? 1 : 0;
  float grad_scale = 1.0f;
  if (clip) {
    // Megatron's clip_grad_norm: coefficient min(1, max_norm / (norm + 1e-6)) over unscaled grads.
    double norm = std::sqrt(static_cast<double>(static_cast<const float*>(call.reads[ri++])[0]));
    if (fp16) norm /= ctx.scaler.scale;
    grad_scale = static_cast<float>(std::min(1.0, t.clip_grad / (norm + 1e-6)));
  }
  const kernels::Dtype gdt = kdtype(o.reads[0].dtype);
  if (adam) {
    kernels::AdamWArgs x;
    x.master = master;
    x.exp_avg = s1;
    x.exp_avg_sq = s2;
    x.grad = call.reads[0];
    x.grad_dtype = gdt;
    x.param = mixed ? call.writes[0] : nullptr;
    x.param_dtype = kdtype(o.writes[0].dtype);
    x.n = n;
    x.lr = static_cast<float>(t.lr);
    x.beta1 = static_cast<float>(t.adam_beta1);
    x.beta2 = static_cast<float>(t.adam_beta2);
    x.eps = static_cast<float>(t.adam_eps);
    x.weight_decay = static_cast<float>(t.weight_decay);
    x.step = call.step;
    x.grad_scale = grad_scale;
    x.loss_scale = fp16 ? &ctx.scaler.scale : nullptr;
    x.found_inf = fp16 ? &found : nullptr;
    kernels::adamw_step_cpu(x);
  } else {
    kernels::SgdArgs x;
    x.master = master;
    x.momentum_buf = s1;
    x.grad = call.reads[0];
    x.grad_dtype = gdt;
    x.param = mixed ? call.writes[0] : nullptr;
    x.param_dtype = kdtype(o.writes[0].dtype);
    x.n = n;
    x.lr = static_cast<float>(t.lr);
    x.momentum = static_cast<float>(t.sgd_momentum);
    x.weight_decay = static_cast<float>(t.weight_decay);
    x.step = call.step;
    x.grad_scale = grad_scale;
    x.loss_scale = fp16 ? &ctx.scaler.scale : nullptr;
    x.found_inf = fp16 ? &found : nullptr;
    kernels::sgd_step_cpu(x);
  }
}

}  // namespace

void run_kernel(const OpCall& call, CpuContext& ctx) {
  const Op& op = call.op;
  switch (op.kind) {
    case OpKind::layernorm_fwd:
    case OpKind::rmsnorm_fwd: norm_fwd(call, ctx); break;
    case OpKind::layernorm_bwd:
    case OpKind::rmsnorm_bwd: norm_bwd(call, ctx); break;
    case OpKind::gelu_fwd:
    case OpKind::gelu_bwd:
    case OpKind::swiglu_fwd:
    case OpKind::swiglu_bwd: activation(call, ctx); break;
    case OpKind::softmax_fwd:
    case OpKind::softmax_bwd: softmax(call, ctx); break;
    case OpKind::dropout_fwd:
    case OpKind::dropout_bwd:
    case OpKind::dropout_add_fwd:
    case OpKind::dropout_add_bwd: dropout(call, ctx); break;
    case OpKind::rope_fwd:
    case OpKind::rope_bwd: rope(call, ctx); break;
    case OpKind::embedding_fwd:
    case OpKind::embedding_bwd: embedding(call, ctx); break;
    case OpKind::xent_max:
    case OpKind::xent_sum:
    case OpKind::xent_loss:
    case OpKind::xent_bwd: cross_entropy(call, ctx); break;
    case OpKind::cast: cast(call, ctx); break;
    case OpKind::overflow_check: {
      int32_t found = 0;
      kernels::CheckOverflowArgs x;
      x.buf = call.reads[0];
      x.n = call.plan.reads[0].numel;
      x.dtype = kdtype(call.plan.reads[0].dtype);
      x.found_inf = &found;
      kernels::check_overflow_cpu(x);
      auto* flag = static_cast<float*>(call.writes[0]);
      flag[0] = std::max(flag[0], static_cast<float>(found));
      break;
    }
    case OpKind::grad_norm: {
      kernels::L2NormSqArgs x;
      x.buf = call.reads[0];
      x.n = call.plan.reads[0].numel;
      x.dtype = kdtype(call.plan.reads[0].dtype);
      x.out = static_cast<float*>(call.writes[0]);
      x.accumulate = true;
      kernels::l2norm_sq_cpu(x);
      break;
    }
    case OpKind::optimizer_step: optimizer(call, ctx); break;
    case OpKind::scaler_update: {
      auto* flag = static_cast<float*>(call.writes[0]);
      ctx.scaler.found_inf = flag[0] > 0 ? 1 : 0;
      kernels::LossScaleConfig cfg;
      cfg.growth_interval = static_cast<int32_t>(std::max<int64_t>(op.kernel()->aux, 1));
      kernels::update_scale_cpu(&ctx.scaler, cfg);
      flag[0] = 0;
      break;
    }
    default: throw InternalError("op " + op_label(op) + ": no CPU implementation for this kind");
  }
}

}  // namespace paralab::exec::cpu
