// paralab exec — `--verify` references for the row-wise and pointwise kernels (verify_refs.hpp):
// norms, activations, the scaled causal softmax, dropout; on the host in double precision.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "exec/verify_refs.hpp"

namespace paralab::exec::verify_detail {

namespace {

// GELU's tanh approximation, 0.5 u (1 + tanh(sqrt(2 / pi) (u + 0.044715 u^3))) (Hendrycks & Gimpel
// 2016, section 2), and its derivative.
double gelu(double u) { return 0.5 * u * (1 + std::tanh(0.7978845608028654 * (u + 0.044715 * u * u * u))); }
double gelu_grad(double u) {
  const double t = std::tanh(0.7978845608028654 * (u + 0.044715 * u * u * u));
  return 0.5 * (1 + t) + 0.5 * u * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * u * u);
}
double sigmoid(double a) { return 1 / (1 + std::exp(-a)); }

// layernorm / rmsnorm: y, and the [rows, 2] statistics (mean, rstd) or (-, rrms).
void norm_fwd_ref(const OpCall&, RefCase& rc) {
  const auto& [op, G, R, W0, W] = rc.view();
  auto check = [&rc](size_t w, int64_t i, double want) { rc.check(w, i, want); };
  const KernelAttrs& k = *op.kernel();
  const bool ln = op.kind == OpKind::layernorm_fwd;
  for (int64_t r = 0; r < k.rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < k.cols; ++c) mean += R[0][static_cast<size_t>(r * k.cols + c)];
    mean /= static_cast<double>(k.cols);
    for (int64_t c = 0; c < k.cols; ++c) {
      const double x = R[0][static_cast<size_t>(r * k.cols + c)] - (ln ? mean : 0.0);
      var += x * x;
    }
    const double rs = 1.0 / std::sqrt(var / static_cast<double>(k.cols) + k.eps);
    for (int64_t c = 0; c < k.cols; ++c) {
      double y = (R[0][static_cast<size_t>(r * k.cols + c)] - (ln ? mean : 0.0)) * rs * R[1][static_cast<size_t>(c)];
      if (ln && R.size() > 2) y += R[2][static_cast<size_t>(c)];
      check(0, r * k.cols + c, y);
    }
    check(1, 2 * r + 1, rs);
    if (ln) check(1, 2 * r, mean);
  }
}

// Their backward: dx (added into the residual gradient when aux = 1), dgamma, dbeta accumulated.
void norm_bwd_ref(const OpCall&, RefCase& rc) {
  const auto& [op, G, R, W0, W] = rc.view();
  auto check = [&rc](size_t w, int64_t i, double want) { rc.check(w, i, want); };
  const KernelAttrs& k = *op.kernel();
  const bool ln = op.kind == OpKind::layernorm_bwd;
  const int64_t C = k.cols;
  std::vector<double> dg(static_cast<size_t>(C), 0.0), db(static_cast<size_t>(C), 0.0);
  for (int64_t r = 0; r < k.rows; ++r) {
    const double mean = ln ? R[2][static_cast<size_t>(2 * r)] : 0.0, rs = R[2][static_cast<size_t>(2 * r + 1)];
    double m1 = 0, m2 = 0;
    for (int64_t c = 0; c < C; ++c) {
      const size_t e = static_cast<size_t>(r * C + c);
      const double xh = (R[1][e] - mean) * rs, gg = R[0][e] * R[3][static_cast<size_t>(c)];
      m1 += gg;
      m2 += gg * xh;
      dg[static_cast<size_t>(c)] += R[0][e] * xh;
      db[static_cast<size_t>(c)] += R[0][e];
    }
    m1 /= static_cast<double>(C);
    m2 /= static_cast<double>(C);
    for (int64_t c = 0; c < C; ++c) {
      const size_t e = static_cast<size_t>(r * C + c);
      const double xh = (R[1][e] - mean) * rs, gg = R[0][e] * R[3][static_cast<size_t>(c)];
      const double dx = ln ? rs * (gg - m1 - xh * m2) : rs * (gg - xh * m2);
      check(0, r * C + c, (k.aux == 1 ? W0[0][e] : 0.0) + dx);
    }
  }
  for (int64_t c = 0; c < C; ++c) {
    check(1, c, W0[1][static_cast<size_t>(c)] + dg[static_cast<size_t>(c)]);
    if (W.size() > 2) check(2, c, W0[2][static_cast<size_t>(c)] + db[static_cast<size_t>(c)]);
  }
}

// gelu (tanh approximation) and swiglu, forward and backward.
void activation_ref(const OpCall&, RefCase& rc) {
  const auto& [op, G, R, W0, W] = rc.view();
  auto check = [&rc](size_t w, int64_t i, double want) { rc.check(w, i, want); };
  const KernelAttrs& k = *op.kernel();
  const int64_t f = k.cols;
  for (int64_t r = 0; r < k.rows; ++r)
    for (int64_t c = 0; c < f; ++c) {
      const int64_t e = r * f + c;
      switch (op.kind) {
        case OpKind::gelu_fwd: check(0, e, gelu(R[0][static_cast<size_t>(e)])); break;
        case OpKind::gelu_bwd: check(0, e, R[0][static_cast<size_t>(e)] * gelu_grad(R[1][static_cast<size_t>(e)])); break;
        case OpKind::swiglu_fwd: {
          const double ga = R[0][static_cast<size_t>(r * 2 * f + c)], up = R[0][static_cast<size_t>(r * 2 * f + f + c)];
          check(0, e, ga * sigmoid(ga) * up);
          break;
        }
        default: {
          const double ga = R[1][static_cast<size_t>(r * 2 * f + c)], up = R[1][static_cast<size_t>(r * 2 * f + f + c)];
          const double dy = R[0][static_cast<size_t>(e)], sg = sigmoid(ga);
          check(0, r * 2 * f + c, dy * up * sg * (1 + ga * (1 - sg)));
          check(0, r * 2 * f + f + c, dy * ga * sg);
        }
      }
    }
}

// The scaled causal softmax of unfused attention and its backward.
void softmax_ref(const OpCall&, RefCase& rc) {
  const auto& [op, G, R, W0, W] = rc.view();
  auto check = [&rc](size_t w, int64_t i, double want) { rc.check(w, i, want); };
  const KernelAttrs& k = *op.kernel();
  const int64_t S = k.cols;
  for (int64_t r = 0; r < k.rows; ++r) {
    const int64_t i = r % S;  // query index within its (batch, head) plane
    if (op.kind == OpKind::softmax_fwd) {
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j <= i; ++j) mx = std::max(mx, k.scale * R[0][static_cast<size_t>(r * S + j)]);
      for (int64_t j = 0; j <= i; ++j) sum += std::exp(k.scale * R[0][static_cast<size_t>(r * S + j)] - mx);
      for (int64_t j = 0; j < S; ++j)
        check(0, r * S + j, j <= i ? std::exp(k.scale * R[0][static_cast<size_t>(r * S + j)] - mx) / sum : 0.0);
    } else {
      double dot = 0;
      for (int64_t j = 0; j < S; ++j) dot += R[0][static_cast<size_t>(r * S + j)] * R[1][static_cast<size_t>(r * S + j)];
      for (int64_t j = 0; j < S; ++j) {
        const size_t e = static_cast<size_t>(r * S + j);
        check(0, r * S + j, k.scale * R[1][e] * (R[0][e] - dot));
      }
    }
  }
}

// Dropout and the fused bias + dropout + residual add with the mask the op drew (an output
// forward, an input backward), and the mask's kept fraction against 1 - p.
void dropout_ref(const OpCall&, RefCase& rc) {
  const auto& [op, G, R, W0, W] = rc.view();
  auto check = [&rc](size_t w, int64_t i, double want) { rc.check(w, i, want); };
  const KernelAttrs& k = *op.kernel();
  const int64_t n = k.rows * k.cols;
  const double sc = k.p < 1 ? 1.0 / (1.0 - k.p) : 0.0;
  // The mask the op drew (fwd: an output; bwd: an input); all kept when there is none.
  const std::vector<double>* mask = nullptr;
  if (op.kind == OpKind::dropout_fwd && W.size() > 1) mask = &W[1];
  if (op.kind == OpKind::dropout_add_fwd && W.size() > 1) mask = &W[1];
  if ((op.kind == OpKind::dropout_bwd || op.kind == OpKind::dropout_add_bwd) && R.size() > 1) mask = &R[1];
  auto keep = [&](int64_t e) { return mask ? (*mask)[static_cast<size_t>(e)] : 1.0; };
  int64_t kept = 0;
  std::vector<double> dbias(static_cast<size_t>(k.cols), 0.0);
  for (int64_t e = 0; e < n; ++e) {
    const double m = keep(e);
    kept += m != 0;
    const auto i = static_cast<size_t>(e);
    switch (op.kind) {
      case OpKind::dropout_fwd: check(0, e, R[0][i] * m * sc); break;
      case OpKind::dropout_bwd: check(0, e, R[0][i] * m * sc); break;
      case OpKind::dropout_add_fwd: {
        const double bias = R.size() > 2 ? R[2][static_cast<size_t>(e % k.cols)] : 0.0;
        check(0, e, R[1][i] + m * (k.p > 0 ? sc : 1.0) * (R[0][i] + bias));
        break;
      }
      default: {
        const double dx = R[0][i] * m * (k.p > 0 ? sc : 1.0);
        check(0, e, dx);
        dbias[static_cast<size_t>(e % k.cols)] += dx;
      }
    }
  }
  if (op.kind == OpKind::dropout_add_bwd && W.size() > 1)
    for (int64_t c = 0; c < k.cols; ++c) check(1, c, W0[1][static_cast<size_t>(c)] + dbias[static_cast<size_t>(c)]);
  if (mask && k.p > 0 && n >= 1000) {  // the kept fraction is 1 - p (within 6 sigma)
    const double frac = static_cast<double>(kept) / static_cast<double>(n), sd = std::sqrt(k.p * (1 - k.p) / static_cast<double>(n));
    const bool ok = std::abs(frac - (1 - k.p)) <= 6 * sd + 1e-9;
    rc.findings.push_back({"ops.dropout_mask", ok, std::abs(frac - (1 - k.p)),
                "rank " + std::to_string(rc.plan.rank) + ": op " + op_label(op) + " kept " + std::to_string(frac) +
                    " of its elements, expected " + std::to_string(1 - k.p)});
  }
}

}  // namespace

void add_kernel_refs(RefTable& t) {
  t.add({OpKind::layernorm_fwd, OpKind::rmsnorm_fwd}, norm_fwd_ref);
  t.add({OpKind::layernorm_bwd, OpKind::rmsnorm_bwd}, norm_bwd_ref);
  t.add({OpKind::gelu_fwd, OpKind::gelu_bwd, OpKind::swiglu_fwd, OpKind::swiglu_bwd}, activation_ref);
  t.add({OpKind::softmax_fwd, OpKind::softmax_bwd}, softmax_ref);
  t.add({OpKind::dropout_fwd, OpKind::dropout_bwd, OpKind::dropout_add_fwd, OpKind::dropout_add_bwd}, dropout_ref);
}

}  // namespace paralab::exec::verify_detail
