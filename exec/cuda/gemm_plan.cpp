// paralab exec/cuda — GemmRole -> cuBLAS calls (see gemm_plan.hpp for the mapping).
#include "exec/cuda/gemm_plan.hpp"

#include <algorithm>

#include "ir/error.hpp"

namespace paralab::exec::cuda {

namespace {

// One operand of a row-major problem: `rows x cols` as stored, row stride ld, batch stride.
struct RowOperand {
  Operand which = Operand::read0;
  int64_t off = 0, ld = 0, stride = 0;
};

// Row-major C[M,N] (beta C) = op(A)[M,K] op(B)[K,N], `batch` times, turned column-major.
BlasCall to_blas(const RowOperand& A, bool ta, const RowOperand& B, bool tb, const RowOperand& C, int64_t M,
                 int64_t N, int64_t K, int64_t batch, float beta, bool bias) {
  BlasCall c;
  c.trans_a = tb;
  c.trans_b = ta;
  c.m = N;
  c.n = M;
  c.k = K;
  c.a = B.which, c.a_off = B.off, c.lda = B.ld, c.stride_a = B.stride;
  c.b = A.which, c.b_off = A.off, c.ldb = A.ld, c.stride_b = A.stride;
  c.c = C.which, c.c_off = C.off, c.ldc = C.ld, c.stride_c = C.stride;
  c.batch = batch;
  c.beta = beta;
  c.bias = bias;
  return c;
}

[[noreturn]] void bad(const Op& op, const std::string& why) {
  throw InternalError("gemm '" + op.full_name() + "' (op " + std::to_string(op.id) + "): " + why);
}

}  // namespace

GemmPlan plan_gemm(const Op& op, const ModelShape& m) {
  const GemmAttrs* gp = op.gemm();
  if (!gp) bad(op, "not a gemm");
  const GemmAttrs& g = *gp;
  GemmPlan p;
  switch (g.role) {
    case GemmRole::linear_fwd:
    case GemmRole::linear_dgrad:
    case GemmRole::linear_wgrad: {
      if (g.batch != 1) bad(op, "linear GEMMs are not batched");
      const RowOperand A{Operand::read0, 0, g.trans_a ? g.m : g.k, 0};
      const RowOperand B{Operand::read1, 0, g.trans_b ? g.k : g.n, 0};
      const RowOperand C{Operand::write0, 0, g.n, 0};
      const bool bias = g.role == GemmRole::linear_fwd && g.bias;
      p.calls.push_back(to_blas(A, g.trans_a, B, g.trans_b, C, g.m, g.n, g.k, 1, g.accumulate ? 1.0f : 0.0f, bias));
      if (g.role == GemmRole::linear_wgrad && g.bias) {
        // dbias[1, N] (+)= ones[1, K] op(B)[K, N]: the column sums of dY in fp32, added into the
        // main gradient when the GEMM accumulates, else written (without gradient-accumulation
        // fusion the bias gradient goes to a fresh, unfilled buffer first: beta 0 never reads it).
        const RowOperand ones{Operand::ones, 0, g.k, 0};
        const RowOperand dbias{Operand::write1, 0, g.n, 0};
        p.calls.push_back(to_blas(ones, false, B, g.trans_b, dbias, 1, g.n, g.k, 1, g.accumulate ? 1.0f : 0.0f, false));
        p.ones = g.k;
      }
      return p;
    }
    default: break;
  }

  const int64_t al = m.heads_local(), gl = m.groups_local(), d = m.head_dim, b = m.micro_batch, s = m.seq_local();
  const int64_t qc = m.qkv_cols(), cc = m.attn_cols();
  if (gl <= 0 || al % gl != 0) bad(op, "heads do not divide into groups");
  const int64_t per = al / gl;
  if (g.batch != b * al) bad(op, "batch " + std::to_string(g.batch) + " is not micro_batch * local heads");
  const int64_t ss = s * s;
  // Per (b_idx, j): operands of head n = b_idx * al + g * per + j as functions of the group g.
  auto q_of = [&](Operand w, int64_t bi, int64_t j) { return RowOperand{w, bi * qc + j * d, b * qc, per * d}; };
  auto k_of = [&](Operand w, int64_t bi) { return RowOperand{w, bi * qc + al * d, b * qc, d}; };
  auto v_of = [&](Operand w, int64_t bi) { return RowOperand{w, bi * qc + (al + gl) * d, b * qc, d}; };
  auto ctx_of = [&](Operand w, int64_t bi, int64_t j) { return RowOperand{w, bi * cc + j * d, b * cc, per * d}; };
  auto sq_of = [&](Operand w, int64_t bi, int64_t j) { return RowOperand{w, (bi * al + j) * ss, s, per * ss}; };

  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t j = 0; j < per; ++j) {
      switch (g.role) {
        case GemmRole::attn_qk:  // S = Q K^T
          p.calls.push_back(to_blas(q_of(Operand::read0, bi, j), false, k_of(Operand::read0, bi), true,
                                    sq_of(Operand::write0, bi, j), s, s, d, gl, 0.0f, false));
          break;
        case GemmRole::attn_pv:  // ctx = P V
          p.calls.push_back(to_blas(sq_of(Operand::read0, bi, j), false, v_of(Operand::read1, bi), false,
                                    ctx_of(Operand::write0, bi, j), s, d, s, gl, 0.0f, false));
          break;
        case GemmRole::attn_dp:  // dP = dctx V^T
          p.calls.push_back(to_blas(ctx_of(Operand::read0, bi, j), false, v_of(Operand::read1, bi), true,
                                    sq_of(Operand::write0, bi, j), s, s, d, gl, 0.0f, false));
          break;
        case GemmRole::attn_dq:  // dQ = dS K
          p.calls.push_back(to_blas(sq_of(Operand::read0, bi, j), false, k_of(Operand::read1, bi), false,
                                    q_of(Operand::write0, bi, j), s, d, s, gl, 0.0f, false));
          break;
        case GemmRole::attn_dv:    // dV_g = sum_j P^T dctx
        case GemmRole::attn_dk: {  // dK_g = sum_j dS^T Q
          const bool dv = g.role == GemmRole::attn_dv;
          const RowOperand rhs = dv ? ctx_of(Operand::read1, bi, j) : q_of(Operand::read1, bi, j);
          RowOperand out = dv ? v_of(Operand::write0, bi) : k_of(Operand::write0, bi);
          float beta = 0.0f;
          if (per > 1) {  // fp32 scratch [T, gl d] (rows like d_qkv), summed over j
            out = RowOperand{Operand::scratch, bi * gl * d, b * gl * d, d};
            beta = j > 0 ? 1.0f : 0.0f;
          }
          p.calls.push_back(to_blas(sq_of(Operand::read0, bi, j), true, rhs, false, out, s, d, s, gl, beta, false));
          break;
        }
        default: bad(op, "unknown role");
      }
    }
  if ((g.role == GemmRole::attn_dv || g.role == GemmRole::attn_dk) && per > 1) {
    p.scratch_cols = gl * d;
    p.scratch_elems = s * b * gl * d;
    p.scatter_rows = s * b;
    p.scatter_col = (g.role == GemmRole::attn_dv ? al + gl : al) * d;
    p.scatter_ld = qc;
  }
  return p;
}

void run_plan_on_host(const GemmPlan& plan, const std::vector<float*>& ops) {
  auto op = [&](Operand o) {
    const auto i = static_cast<size_t>(o);
    if (i >= ops.size() || !ops[i]) throw InternalError("run_plan_on_host: operand missing");
    return ops[i];
  };
  for (const BlasCall& c : plan.calls) {
    const float* bias = c.bias ? op(Operand::read2) : nullptr;
    for (int64_t i = 0; i < c.batch; ++i) {
      const float* A = op(c.a) + c.a_off + i * c.stride_a;
      const float* B = op(c.b) + c.b_off + i * c.stride_b;
      float* C = op(c.c) + c.c_off + i * c.stride_c;
      for (int64_t col = 0; col < c.n; ++col)
        for (int64_t row = 0; row < c.m; ++row) {
          double acc = 0;
          for (int64_t l = 0; l < c.k; ++l) {
            const double a = c.trans_a ? A[l + row * c.lda] : A[row + l * c.lda];
            const double bb = c.trans_b ? B[col + l * c.ldb] : B[l + col * c.ldb];
            acc += a * bb;
          }
          float& out = C[row + col * c.ldc];
          out = static_cast<float>(acc + (c.beta != 0.0f ? static_cast<double>(c.beta) * out : 0.0) + (bias ? bias[row] : 0.0f));
        }
    }
  }
  if (plan.scratch_elems > 0) {
    const float* src = op(Operand::scratch);
    float* dst = op(Operand::write0);
    for (int64_t r = 0; r < plan.scatter_rows; ++r)
      for (int64_t c = 0; c < plan.scratch_cols; ++c)
        dst[r * plan.scatter_ld + plan.scatter_col + c] = src[r * plan.scratch_cols + c];
  }
}

Fp8Layout fp8_layout(const BlasCall& c) { return Fp8Layout{!c.trans_a, c.trans_b}; }

std::string describe(const BlasCall& c) {
  auto name = [](Operand o) {
    static const char* n[] = {"read0", "read1", "read2", "write0", "write1", "scratch", "ones"};
    return std::string(n[static_cast<size_t>(o)]);
  };
  return std::string("gemm") + (c.trans_a ? "T" : "N") + (c.trans_b ? "T" : "N") + " m=" + std::to_string(c.m) +
         " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) + " batch=" + std::to_string(c.batch) + " A=" +
         name(c.a) + "+" + std::to_string(c.a_off) + " lda=" + std::to_string(c.lda) + " B=" + name(c.b) + "+" +
         std::to_string(c.b_off) + " ldb=" + std::to_string(c.ldb) + " C=" + name(c.c) + "+" + std::to_string(c.c_off) +
         " ldc=" + std::to_string(c.ldc) + " beta=" + std::to_string(c.beta) + (c.bias ? " +bias" : "");
}

}  // namespace paralab::exec::cuda
