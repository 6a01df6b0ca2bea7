// paralab exec/cpu — GEMMs with Eigen: C[m,n] (+)= op(A) op(B), batched, in fp32 (bf16/f16
// storage is converted to fp32 for the multiply and rounded once when C is stored), for every
// GemmRole of docs/ir.md: linear layers (with bias epilogue and bias-gradient output) and the
// unfused attention's batched GEMMs on strided Q/K/V views inside the qkv buffer.
#include <string>

#include <Eigen/Core>

#include "exec/cpu/cpu_math.hpp"
#include "exec/kernel_args.hpp"
#include "exec/plan.hpp"
#include "ir/error.hpp"

namespace paralab::exec::cpu {

namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatMap = Eigen::Map<RowMat, 0, Eigen::OuterStride<>>;
using CMatMap = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;

// Scratch slots of this file (cpu_math.hpp: Scratch).
enum : int { kSlotA = 8, kSlotB = 9, kSlotC = 10, kSlotBias = 11 };

// A row-major matrix in storage: rows x cols, `ld` elements between rows.
struct Mat {
  void* p = nullptr;
  DType t = DType::f32;
  int64_t rows = 0, cols = 0, ld = 0;
};

Mat offset(Mat m, int64_t elements) {
  m.p = static_cast<char*>(m.p) + elements * bytes_of(m.t);
  return m;
}

// fp32 view of `m`: the data itself for f32, else a converted copy in scratch slot `slot`.
CMatMap as_f32(const Mat& m, Scratch& s, int slot) {
  if (m.t == DType::f32) return CMatMap(static_cast<const float*>(m.p), m.rows, m.cols, Eigen::OuterStride<>(m.ld));
  float* tmp = s.get(slot, m.rows * m.cols);
  for (int64_t r = 0; r < m.rows; ++r)
    load_f32(static_cast<const char*>(m.p) + r * m.ld * bytes_of(m.t), m.t, m.cols, tmp + r * m.cols);
  return CMatMap(tmp, m.rows, m.cols, Eigen::OuterStride<>(m.cols));
}

template <class Acc, class A, class B>
void product(Acc& c, const A& a, bool ta, const B& b, bool tb, bool add) {
  if (!ta && !tb) add ? void(c.noalias() += a * b) : void(c.noalias() = a * b);
  else if (ta && !tb) add ? void(c.noalias() += a.transpose() * b) : void(c.noalias() = a.transpose() * b);
  else if (!ta && tb) add ? void(c.noalias() += a * b.transpose()) : void(c.noalias() = a * b.transpose());
  else add ? void(c.noalias() += a.transpose() * b.transpose()) : void(c.noalias() = a.transpose() * b.transpose());
}

struct Term {
  Mat a, b;
};

// C (+)= sum_i op(A_i) op(B_i) [+ bias row], fp32 accumulation, one rounding into C.
void gemm_sum(const std::vector<Term>& terms, bool ta, bool tb, const Mat& C, bool accumulate, const float* bias,
              Scratch& s) {
  auto run = [&](auto& c) {
    for (size_t i = 0; i < terms.size(); ++i) {
      const CMatMap a = as_f32(terms[i].a, s, kSlotA);
      const CMatMap b = as_f32(terms[i].b, s, kSlotB);
      product(c, a, ta, b, tb, accumulate || i > 0);
    }
    if (bias) c.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(bias, C.cols);
  };
  if (C.t == DType::f32) {
    MatMap c(static_cast<float*>(C.p), C.rows, C.cols, Eigen::OuterStride<>(C.ld));
    run(c);
    return;
  }
  MatMap c(s.get(kSlotC, C.rows * C.cols), C.rows, C.cols, Eigen::OuterStride<>(C.cols));
  if (accumulate)
    for (int64_t r = 0; r < C.rows; ++r)
      load_f32(static_cast<const char*>(C.p) + r * C.ld * bytes_of(C.t), C.t, C.cols, c.data() + r * C.cols);
  run(c);
  for (int64_t r = 0; r < C.rows; ++r)
    store_f32(static_cast<char*>(C.p) + r * C.ld * bytes_of(C.t), C.t, C.cols, c.data() + r * C.cols);
}

void linear(const OpCall& call, CpuContext& ctx) {
  const Op& op = call.op;
  const GemmAttrs& g = *op.gemm();
  const OpPlan& o = call.plan;
  if (g.batch != 1) throw InternalError("gemm " + op_label(op) + ": linear GEMMs are not batched");
  args::expect_numel(call, true, 0, g.m * g.k, "A");
  args::expect_numel(call, true, 1, g.k * g.n, "B");
  args::expect_numel(call, false, 0, g.m * g.n, "C");
  const Mat A{call.reads[0], o.reads[0].dtype, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.trans_a ? g.m : g.k};
  const Mat B{call.reads[1], o.reads[1].dtype, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.trans_b ? g.k : g.n};
  const Mat C{call.writes[0], o.writes[0].dtype, g.m, g.n, g.n};
  const float* bias = nullptr;
  if (g.role == GemmRole::linear_fwd && g.bias) {
    args::expect_numel(call, true, 2, g.n, "bias");
    float* bf = ctx.scratch.get(kSlotBias, g.n);
    load_f32(call.reads[2], o.reads[2].dtype, g.n, bf);
    bias = bf;
  }
  gemm_sum({{A, B}}, g.trans_a, g.trans_b, C, g.accumulate, bias, ctx.scratch);
  if (g.role == GemmRole::linear_wgrad && g.bias) {
    // Bias gradient: column sums of dY (operand B, [T, out]), accumulated like dW (or fresh,
    // without gradient-accumulation fusion).
    args::expect_numel(call, false, 1, g.n, "bias gradient");
    const CMatMap dy = as_f32(B, ctx.scratch, kSlotB);
    const Eigen::RowVectorXf sums = g.trans_b ? Eigen::RowVectorXf(dy.rowwise().sum().transpose()) : Eigen::RowVectorXf(dy.colwise().sum());
    add_into(call.writes[1], o.writes[1].dtype, g.n, sums.data(), g.accumulate);
  }
}

// Unfused attention: the [b*a/t] batch of per-head matrices inside qkv, ctx and scores.
void attention_gemm(const OpCall& call, CpuContext& ctx) {
  const Op& op = call.op;
  const GemmAttrs& g = *op.gemm();
  const OpPlan& o = call.plan;
  const ModelShape& m = ctx.shape;
  const int64_t al = m.heads_local(), gl = m.groups_local(), d = m.head_dim, b = m.micro_batch, s = m.seq_local();
  const int64_t qkv_cols = m.qkv_cols(), ctx_cols = m.attn_cols(), per_group = al / gl;
  if (g.batch != b * al) throw InternalError("gemm " + op_label(op) + ": batch is not micro_batch * local heads");
  // Per-head matrices. Rows of [T, *] tensors are (position, batch entry) = i * b + b_idx.
  auto qkv_part = [&](void* base, DType t, int64_t col) {  // an s x d block of a qkv-shaped tensor
    return [=](int64_t n, int64_t which) {                 // which: 0 Q head, 1 K group, 2 V group
      const int64_t b_idx = n / al, head = n % al, grp = head / per_group;
      const int64_t c = which == 0 ? head * d : which == 1 ? (al + grp) * d : (al + gl + grp) * d;
      return offset(Mat{base, t, s, d, b * qkv_cols}, b_idx * qkv_cols + c + col);
    };
  };
  auto ctx_head = [&](void* base, DType t, int64_t n) {
    return offset(Mat{base, t, s, d, b * ctx_cols}, (n / al) * ctx_cols + (n % al) * d);
  };
  auto square = [&](void* base, DType t, int64_t n) { return offset(Mat{base, t, s, s, s}, n * s * s); };

  const int64_t bh = b * al;
  switch (g.role) {
    case GemmRole::attn_qk: {  // S = Q K^T
      const auto q = qkv_part(call.reads[0], o.reads[0].dtype, 0);
      for (int64_t n = 0; n < bh; ++n)
        gemm_sum({{q(n, 0), q(n, 1)}}, false, true, square(call.writes[0], o.writes[0].dtype, n), false, nullptr, ctx.scratch);
      break;
    }
    case GemmRole::attn_pv: {  // ctx = P V
      const auto v = qkv_part(call.reads[1], o.reads[1].dtype, 0);
      for (int64_t n = 0; n < bh; ++n)
        gemm_sum({{square(call.reads[0], o.reads[0].dtype, n), v(n, 2)}}, false, false,
                 ctx_head(call.writes[0], o.writes[0].dtype, n), false, nullptr, ctx.scratch);
      break;
    }
    case GemmRole::attn_dp: {  // dP = dctx V^T
      const auto v = qkv_part(call.reads[1], o.reads[1].dtype, 0);
      for (int64_t n = 0; n < bh; ++n)
        gemm_sum({{ctx_head(call.reads[0], o.reads[0].dtype, n), v(n, 2)}}, false, true,
                 square(call.writes[0], o.writes[0].dtype, n), false, nullptr, ctx.scratch);
      break;
    }
    case GemmRole::attn_dq: {  // dQ = dS K
      const auto k = qkv_part(call.reads[1], o.reads[1].dtype, 0);
      const auto dq = qkv_part(call.writes[0], o.writes[0].dtype, 0);
      for (int64_t n = 0; n < bh; ++n)
        gemm_sum({{square(call.reads[0], o.reads[0].dtype, n), k(n, 1)}}, false, false, dq(n, 0), false, nullptr,
                 ctx.scratch);
      break;
    }
    case GemmRole::attn_dv:    // dV_g = sum over the group's heads of P^T dctx
    case GemmRole::attn_dk: {  // dK_g = sum over the group's heads of dS^T Q
      const bool dv = g.role == GemmRole::attn_dv;
      const auto out = qkv_part(call.writes[0], o.writes[0].dtype, 0);
      const auto q = qkv_part(call.reads[1], o.reads[1].dtype, 0);
      for (int64_t n0 = 0; n0 < bh; n0 += per_group) {
        std::vector<Term> terms;
        for (int64_t n = n0; n < n0 + per_group; ++n) {
          const Mat a = square(call.reads[0], o.reads[0].dtype, n);
          terms.push_back({a, dv ? ctx_head(call.reads[1], o.reads[1].dtype, n) : q(n, 0)});
        }
        gemm_sum(terms, true, false, out(n0, dv ? 2 : 1), false, nullptr, ctx.scratch);
      }
      break;
    }
    default: throw InternalError("gemm " + op_label(op) + ": not an attention role");
  }
}

}  // namespace

void run_gemm(const OpCall& call, CpuContext& ctx) {
  switch (call.op.gemm()->role) {
    case GemmRole::linear_fwd:
    case GemmRole::linear_dgrad:
    case GemmRole::linear_wgrad: linear(call, ctx); break;
    default: attention_gemm(call, ctx); break;
  }
}

}  // namespace paralab::exec::cpu
