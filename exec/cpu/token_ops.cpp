// paralab exec/cpu — the ops that know token positions and the vocabulary, on the CPU twins of
// kernels/ (docs/ir.md, "Memory-bound kernels"): RoPE over this context-parallel rank's chunks
// of the sequence, the vocab-parallel embedding with learned positions, and the vocab-parallel
// cross-entropy stages (local max, exp-sum and target logit, loss, gradient).
#include <cmath>

#include "exec/cpu/kernel_families.hpp"
#include "kernels/rope.hpp"

namespace paralab::exec::cpu {

namespace {

// RoPE rotates the query heads and key groups of every qkv row (its first (a+g)/t * d columns),
// in fp32 on a packed copy stored back with one rounding.
void rope(const OpCall& call, CpuContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const ModelShape& m = ctx.shape;
  const int64_t T = k.rows, cols = k.cols, heads = m.heads_local() + m.groups_local(), d = m.head_dim;
  const int64_t w = heads * d;
  args::expect_numel(call, true, 0, T * cols, "qkv");
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

// reads {token ids [T], this rank's vocabulary slice of the table [V, h], [positions]}, writes
// the hidden states [T, h]: rows of ids outside the slice are zero (summed over tensor ranks).
void embedding_fwd(const OpCall& call, CpuContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const int64_t T = k.rows, h = k.cols, b = ctx.shape.micro_batch;
  const DType dt = call.plan.writes[0].dtype;
  kernels::embedding_fwd_cpu(args::embedding_fwd(call, site(ctx)));
  // Learned positions, each added once over tensor parallelism (the partial sums are
  // all-reduced): this rank's share of the positions, a row at a time in fp32.
  if (call.reads.size() > 2) {
    const CpSplit split = cp_split(ctx.shape, ctx.plan.coord.cp);  // row r is local position r / b
    const DType pt = call.plan.reads[2].dtype;
    const auto [r0, r1] = position_add_rows(ctx.plan, T);
    float* row = ctx.scratch.get(0, h);
    for (int64_t r = r0; r < r1; ++r) {
      load_f32(static_cast<const char*>(call.reads[2]) + split.position(r / b) * h * bytes_of(pt), pt, h, row);
      add_into(static_cast<char*>(call.writes[0]) + r * h * bytes_of(dt), dt, h, row, true);
    }
  }
}

// reads {d hidden [T, h], token ids}, writes {d table, [d positions]}: scatter-adds.
void embedding_bwd(const OpCall& call, CpuContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const int64_t T = k.rows, h = k.cols, b = ctx.shape.micro_batch;
  const F32Grad dtable(call.writes[0], call.plan.writes[0], ctx.scratch.get(0, ctx.shape.vocab_local() * h));
  kernels::embedding_bwd_cpu(args::embedding_bwd(call, site(ctx), dtable.ptr()));
  dtable.commit();
  if (call.writes.size() > 1) {
    const CpSplit split = cp_split(ctx.shape, ctx.plan.coord.cp);  // row r is local position r / b
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

// exp(logit - max) kept for the backward pass; [T, 2] = (sum of exps, target logit or 0).
void xent_sum(const OpCall& call, CpuContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const int64_t T = k.rows, V = k.cols, vstart = args::vocab_start(site(ctx));
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
}

// reads {[T, 2] sums (all-reduced), row max}, writes the per-token loss [T].
void xent_loss(const OpCall& call, CpuContext& ctx) {
  const int64_t T = call.op.kernel()->rows;
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
}

// d logits = (softmax - onehot) * the current loss scale / (T * micro-batches * dp group).
void xent_bwd(const OpCall& call, CpuContext& ctx) {
  const KernelAttrs& k = *call.op.kernel();
  const int64_t T = k.rows, V = k.cols, vstart = args::vocab_start(site(ctx));
  const auto* ex = static_cast<const float*>(call.reads[0]);
  const auto* sums = static_cast<const float*>(call.reads[1]);
  const auto* labels = static_cast<const int32_t*>(call.reads[2]);
  const DType dt = call.plan.writes[0].dtype;
  const bool scaled = ctx.scenario.training.precision == Precision::fp16;  // dynamic loss scaling
  const float g = static_cast<float>(xent_grad_scale(ctx.plan, k, scaled ? ctx.scaler.scale : 1.0));
  float* row = ctx.scratch.get(0, V);
  for (int64_t r = 0; r < T; ++r) {
    const float inv = 1.0f / sums[2 * r];
    for (int64_t v = 0; v < V; ++v) row[v] = ex[r * V + v] * inv;
    const int64_t local = labels[r] - vstart;
    if (local >= 0 && local < V) row[local] -= 1.0f;
    for (int64_t v = 0; v < V; ++v) row[v] *= g;
    store_f32(static_cast<char*>(call.writes[0]) + r * V * bytes_of(dt), dt, V, row);
  }
}

}  // namespace

void add_token_ops(CpuKernelTable& t) {
  t.add({OpKind::rope_fwd, OpKind::rope_bwd}, rope);
  t.add({OpKind::embedding_fwd}, embedding_fwd).add({OpKind::embedding_bwd}, embedding_bwd);
  t.add({OpKind::xent_max}, [](const OpCall& c, CpuContext&) { kernels::ce_local_max_cpu(args::xent_max(c)); });
  t.add({OpKind::xent_sum}, xent_sum);
  t.add({OpKind::xent_loss}, xent_loss).add({OpKind::xent_bwd}, xent_bwd);
}

}  // namespace paralab::exec::cpu
