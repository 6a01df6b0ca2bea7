// paralab exec — `--verify` references for the token-level ops and the optimizer's
// (verify_refs.hpp): RoPE, the vocab-parallel embedding and cross-entropy stages, gradient
// accumulation without fusion, the gradient norm, the optimizer step and offload's copies; on the host in double
// precision.
#include <algorithm>
#include <cmath>
#include <vector>

#include "exec/verify_refs.hpp"

namespace paralab::exec::verify_detail {

namespace {

// RoPE on the query heads and key groups of every qkv row at its global position (values pass).
void rope_ref(const OpCall&, RefCase& rc) {
  const auto& [op, G, R, W0, W] = rc.view();
  auto check = [&rc](size_t w, int64_t i, double want) { rc.check(w, i, want); };
  const KernelAttrs& k = *op.kernel();
  const int64_t heads = G.al + G.gl, half = G.d / 2;
  const double dir = op.kind == OpKind::rope_fwd ? 1.0 : -1.0;
  for (int64_t r = 0; r < k.rows; ++r) {
    const double pos = static_cast<double>(G.cp.position(r / G.b));
    for (int64_t h = 0; h < G.al + 2 * G.gl; ++h)
      for (int64_t i = 0; i < G.d; ++i) {
        const int64_t e = r * G.qc + h * G.d + i;
        if (h >= heads) {  // values are not rotated
          check(0, e, R[0][static_cast<size_t>(e)]);
          continue;
        }
        const int64_t pi = i < half ? i : i - half;
        const double ang = dir * pos * std::pow(static_cast<double>(k.scale), -2.0 * static_cast<double>(pi) / static_cast<double>(G.d));
        const double x1 = R[0][static_cast<size_t>(r * G.qc + h * G.d + pi)], x2 = R[0][static_cast<size_t>(r * G.qc + h * G.d + pi + half)];
        check(0, e, i < half ? x1 * std::cos(ang) - x2 * std::sin(ang) : x2 * std::cos(ang) + x1 * std::sin(ang));
      }
  }
}

// The vocab-parallel embedding with this rank's share of the learned positions, and its
// backward: scatter-adds into the table's and the positions' gradients.
void embedding_ref(const OpCall&, RefCase& rc) {
  const auto& [op, G, R, W0, W] = rc.view();
  auto check = [&rc](size_t w, int64_t i, double want) { rc.check(w, i, want); };
  const KernelAttrs& k = *op.kernel();
  const int64_t h = k.cols;
  if (op.kind == OpKind::embedding_fwd) {
    const auto [add0, add1] = position_add_rows(rc.plan, k.rows);  // this rank's share of the positions
    for (int64_t r = 0; r < k.rows; ++r) {
      const int64_t id = static_cast<int64_t>(R[0][static_cast<size_t>(r)]) - G.vstart;
      const int64_t pos = G.cp.position(r / G.b);
      for (int64_t c = 0; c < h; ++c) {
        double v = id >= 0 && id < G.V ? R[1][static_cast<size_t>(id * h + c)] : 0.0;
        if (R.size() > 2 && r >= add0 && r < add1) v += R[2][static_cast<size_t>(pos * h + c)];
        check(0, r * h + c, v);
      }
    }
  } else {
    std::vector<double> dt = W0[0];
    std::vector<double> dp = W.size() > 1 ? W0[1] : std::vector<double>{};
    const auto [own0, own1] = position_grad_rows(rc.plan, k.rows);
    for (int64_t r = 0; r < k.rows; ++r) {
      const int64_t id = static_cast<int64_t>(R[1][static_cast<size_t>(r)]) - G.vstart;
      const int64_t pos = G.cp.position(r / G.b);
      const bool own_row = r >= own0 && r < own1;  // SP: this rank's share of the positions' gradient
      for (int64_t c = 0; c < h; ++c) {
        const double g = R[0][static_cast<size_t>(r * h + c)];
        if (id >= 0 && id < G.V) dt[static_cast<size_t>(id * h + c)] += g;
        if (!dp.empty() && own_row) dp[static_cast<size_t>(pos * h + c)] += g;
      }
    }
    for (size_t e = 0; e < dt.size(); ++e) check(0, static_cast<int64_t>(e), dt[e]);
    for (size_t e = 0; e < dp.size(); ++e) check(1, static_cast<int64_t>(e), dp[e]);
  }
}

// The vocab-parallel cross-entropy stages: local max, exp-sum and target logit, loss, gradient.
void xent_ref(const OpCall&, RefCase& rc) {
  const auto& [op, G, R, W0, W] = rc.view();
  auto check = [&rc](size_t w, int64_t i, double want) { rc.check(w, i, want); };
  const KernelAttrs& k = *op.kernel();
  const int64_t T = k.rows, V = k.cols;
  for (int64_t r = 0; r < T; ++r) {
    switch (op.kind) {
      case OpKind::xent_max: {
        double mx = -1e300;
        for (int64_t v = 0; v < V; ++v) mx = std::max(mx, R[0][static_cast<size_t>(r * V + v)]);
        check(0, r, mx);
        break;
      }
      case OpKind::xent_sum: {
        double sum = 0;
        for (int64_t v = 0; v < V; ++v) {
          const double e = std::exp(R[0][static_cast<size_t>(r * V + v)] - R[1][static_cast<size_t>(r)]);
          sum += e;
          check(0, r * V + v, e);
        }
        const int64_t local = static_cast<int64_t>(R[2][static_cast<size_t>(r)]) - G.vstart;
        check(1, 2 * r, sum);
        check(1, 2 * r + 1, local >= 0 && local < V ? R[0][static_cast<size_t>(r * V + local)] : 0.0);
        break;
      }
      case OpKind::xent_loss:
        check(0, r, std::log(R[0][static_cast<size_t>(2 * r)]) + R[1][static_cast<size_t>(r)] - R[0][static_cast<size_t>(2 * r + 1)]);
        break;
      default: {  // averaged over the global batch: / (T * micro-batches * dp group)
        const double g = xent_grad_scale(rc.plan, k, rc.loss_scale);
        const int64_t local = static_cast<int64_t>(R[2][static_cast<size_t>(r)]) - G.vstart;
        for (int64_t v = 0; v < V; ++v)
          check(0, r * V + v, (R[0][static_cast<size_t>(r * V + v)] / R[1][static_cast<size_t>(2 * r)] - (v == local ? 1.0 : 0.0)) * g);
      }
    }
  }
}

// grad_accumulate: the gradient view += the fresh gradient (other casts have no reference).
void grad_accumulate_ref(const OpCall&, RefCase& rc) {
  const auto& [op, G, R, W0, W] = rc.view();
  auto check = [&rc](size_t w, int64_t i, double want) { rc.check(w, i, want); };
  for (size_t e = 0; e < W[0].size(); ++e) check(0, static_cast<int64_t>(e), W0[0][e] + R[0][e]);
}

// This rank's partial sum of squares, accumulated.
void grad_norm_ref(const OpCall&, RefCase& rc) {
  const auto& [op, G, R, W0, W] = rc.view();
  auto check = [&rc](size_t w, int64_t i, double want) { rc.check(w, i, want); };
  double sum = W0[0][0];
  for (double x : R[0]) sum += x * x;
  check(0, 0, sum);
}

// Offload's host <-> device copy: the destination is the source.
void copy_ref(const OpCall&, RefCase& rc) {
  const auto& [op, G, R, W0, W] = rc.view();
  for (size_t e = 0; e < W[0].size(); ++e) rc.check(0, static_cast<int64_t>(e), R[0][e]);
}

// Adam(W) or SGD on fp32 and mixed precision with clipping (fp16 steps: finiteness only).
void optimizer_ref(const OpCall& call, RefCase& rc) {
  const auto& [op, G, R, W0, W] = rc.view();
  auto check = [&rc](size_t w, int64_t i, double want) { rc.check(w, i, want); };
  const TrainingConfig& t = rc.plan.ir->scenario.training;
  const bool mixed = is_mixed(t.precision), adam = t.optimizer == Optimizer::adam;
  const bool fp16 = t.precision == Precision::fp16, clip = t.clip_grad > 0;
  size_t ri = 2 + mixed + adam;
  const bool skip = fp16 && R[ri++][0] > 0;
  double gs = 1;
  if (clip) gs = std::min(1.0, t.clip_grad / (std::sqrt(R[ri++][0]) + 1e-6));
  if (fp16) return;  // the loss scale lives in the backend; fp16 steps are checked for finiteness only
  const size_t mw = mixed ? 1 : 0, s1w = mixed ? 2 : 1, s2w = s1w + 1;
  const int64_t step = call.step;
  const double b1c = 1 - std::pow(t.adam_beta1, static_cast<double>(step)), b2c = 1 - std::pow(t.adam_beta2, static_cast<double>(step));
  for (size_t e = 0; e < R[0].size(); ++e) {
    if (skip) break;
    const double g = R[0][e] * gs, th = W0[mw][e];
    if (adam) {
      const double m = t.adam_beta1 * W0[s1w][e] + (1 - t.adam_beta1) * g;
      const double v = t.adam_beta2 * W0[s2w][e] + (1 - t.adam_beta2) * g * g;
      const double nt = th - t.lr * t.weight_decay * th - (t.lr / b1c) * m / (std::sqrt(v) / std::sqrt(b2c) + t.adam_eps);
      check(s1w, static_cast<int64_t>(e), m);
      check(s2w, static_cast<int64_t>(e), v);
      check(mw, static_cast<int64_t>(e), nt);
    } else {
      const double gg = g + t.weight_decay * th;
      const double buf = step == 1 ? gg : t.sgd_momentum * W0[s1w][e] + gg;
      check(s1w, static_cast<int64_t>(e), buf);
      check(mw, static_cast<int64_t>(e), th - t.lr * buf);
    }
  }
}

}  // namespace

void add_token_refs(RefTable& t) {
  t.add({OpKind::rope_fwd, OpKind::rope_bwd}, rope_ref);
  t.add({OpKind::embedding_fwd, OpKind::embedding_bwd}, embedding_ref);
  t.add({OpKind::xent_max, OpKind::xent_sum, OpKind::xent_loss, OpKind::xent_bwd}, xent_ref);
  t.add({OpKind::cast}, grad_accumulate_ref);  // OpChecker samples only grad_accumulate among casts
  t.add({OpKind::grad_norm}, grad_norm_ref);
  t.add({OpKind::optimizer_step}, optimizer_ref);
  t.add({OpKind::copy}, copy_ref);
}

}  // namespace paralab::exec::verify_detail
