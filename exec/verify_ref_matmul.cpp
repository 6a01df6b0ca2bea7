// paralab exec — `--verify` references for the matrix products (verify_refs.hpp): GEMMs of every
// role and fused attention, recomputed on the host in double precision from the op's inputs.
#include <algorithm>
#include <cmath>
#include <vector>

#include "exec/verify_refs.hpp"

namespace paralab::exec::verify_detail {

namespace {

// GEMMs of every role: the linear layers (bias, bias gradient, accumulation) and the unfused
// attention's products over the fused QKV layout (GQA: query head h reads group h / (a / g)).
void gemm_ref(const OpCall&, RefCase& rc) {
  const auto& [op, G, R, W0, W] = rc.view();
  auto check = [&rc](size_t w, int64_t i, double want) { rc.check(w, i, want); };
  const GemmAttrs& g = *op.gemm();
  switch (g.role) {
    case GemmRole::linear_fwd:
    case GemmRole::linear_dgrad:
    case GemmRole::linear_wgrad: {
      const auto& A = R[0];
      const auto& B = R[1];
      auto a = [&](int64_t i, int64_t l) { return g.trans_a ? A[static_cast<size_t>(l * g.m + i)] : A[static_cast<size_t>(i * g.k + l)]; };
      auto bb = [&](int64_t l, int64_t j) { return g.trans_b ? B[static_cast<size_t>(j * g.k + l)] : B[static_cast<size_t>(l * g.n + j)]; };
      const bool bias = g.role == GemmRole::linear_fwd && g.bias;
      sample(g.m * g.n, [&](int64_t e) {
        const int64_t i = e / g.n, j = e % g.n;
        double acc = g.accumulate ? W0[0][static_cast<size_t>(e)] : 0.0;
        for (int64_t l = 0; l < g.k; ++l) acc += a(i, l) * bb(l, j);
        if (bias) acc += R[2][static_cast<size_t>(j)];
        check(0, e, acc);
      });
      if (g.role == GemmRole::linear_wgrad && g.bias)
        for (int64_t j = 0; j < g.n; ++j) {
          double acc = g.accumulate ? W0[1][static_cast<size_t>(j)] : 0.0;
          for (int64_t l = 0; l < g.k; ++l) acc += B[static_cast<size_t>(l * g.n + j)];
          check(1, j, acc);
        }
      break;
    }
    default: {
      // Per head n = b_idx * a/t + h; token row of position i is i*b + b_idx.
      auto Ci = [&](const std::vector<double>& ctx, int64_t bi, int64_t h, int64_t i, int64_t c) {
        return ctx[static_cast<size_t>((i * G.b + bi) * G.cc + h * G.d + c)];
      };
      auto Sq = [&](const std::vector<double>& sq, int64_t n, int64_t i, int64_t j) {
        return sq[static_cast<size_t>((n * G.s + i) * G.s + j)];
      };
      const int64_t per = G.al / G.gl;
      // A [b*a/t, s, s] product over the head dimension: lhs(bi, h, i, c) x rhs(bi, h/per, j, c).
      auto scores = [&](const auto& lhs, const auto& rhs) {
        sample(G.b * G.al * G.s * G.s, [&](int64_t e) {
          const int64_t n = e / (G.s * G.s), i = e / G.s % G.s, j = e % G.s, bi = n / G.al, h = n % G.al;
          double acc = 0;
          for (int64_t c = 0; c < G.d; ++c) acc += lhs(bi, h, i, c) * rhs(bi, h / per, j, c);
          check(0, e, acc);
        });
      };
      switch (g.role) {
        case GemmRole::attn_qk:
          scores([&](int64_t bi, int64_t h, int64_t i, int64_t c) { return G.Qi(R[0], bi, h, i, c); },
                 [&](int64_t bi, int64_t gr, int64_t j, int64_t c) { return G.Ki(R[0], bi, gr, j, c); });
          break;
        case GemmRole::attn_pv:
        case GemmRole::attn_dp:
          if (g.role == GemmRole::attn_pv)
            sample(G.s * G.b * G.cc, [&](int64_t e) {
              const int64_t row = e / G.cc, col = e % G.cc, i = row / G.b, bi = row % G.b, h = col / G.d, c = col % G.d;
              double acc = 0;
              for (int64_t j = 0; j < G.s; ++j) acc += Sq(R[0], bi * G.al + h, i, j) * G.Vi(R[1], bi, h / per, j, c);
              check(0, e, acc);
            });
          else
            scores([&](int64_t bi, int64_t h, int64_t i, int64_t c) { return Ci(R[0], bi, h, i, c); },
                   [&](int64_t bi, int64_t gr, int64_t j, int64_t c) { return G.Vi(R[1], bi, gr, j, c); });
          break;
        case GemmRole::attn_dq:
        case GemmRole::attn_dk:
        case GemmRole::attn_dv: {
          // Only the Q (dq), K (dk) or V (dv) columns of d_qkv are this op's output.
          const int64_t part = g.role == GemmRole::attn_dq ? 0 : g.role == GemmRole::attn_dk ? 1 : 2;
          const int64_t heads = part == 0 ? G.al : G.gl;
          const int64_t col0 = part == 0 ? 0 : part == 1 ? G.al * G.d : (G.al + G.gl) * G.d;
          sample(G.s * G.b * heads * G.d, [&](int64_t e) {
            const int64_t row = e / (heads * G.d), hc = e % (heads * G.d), i = row / G.b, bi = row % G.b;
            const int64_t hh = hc / G.d, c = hc % G.d;
            double acc = 0;
            if (part == 0) {
              for (int64_t j = 0; j < G.s; ++j) acc += Sq(R[0], bi * G.al + hh, i, j) * G.Ki(R[1], bi, hh / per, j, c);
            } else {
              for (int64_t h = hh * per; h < (hh + 1) * per; ++h)
                for (int64_t q = 0; q < G.s; ++q)  // this output row is key/value position i
                  acc += Sq(R[0], bi * G.al + h, q, i) * (part == 1 ? G.Qi(R[1], bi, h, q, c) : Ci(R[1], bi, h, q, c));
            }
            check(0, row * G.qc + col0 + hc, acc);
          });
          break;
        }
        default: break;
      }
    }
  }
}

// Fused attention over this rank's own block (cp_size 1): exact causal probabilities, the
// output and its log-sum-exp; backward dQ, dK, dV into d_qkv's columns.
void attention_ref(const OpCall&, RefCase& rc) {
  const auto& [op, G, R, W0, W] = rc.view();
  auto check = [&rc](size_t w, int64_t i, double want) { rc.check(w, i, want); };
  const AttentionAttrs& a = *op.attention();
  const double scale = 1.0 / std::sqrt(static_cast<double>(G.d));
  const auto& qkv = R[0];
  auto Q = [&](int64_t bi, int64_t h, int64_t i, int64_t c) { return G.Qi(qkv, bi, h, i, c); };
  auto K = [&](int64_t bi, int64_t gr, int64_t j, int64_t c) { return G.Ki(qkv, bi, gr, j, c); };
  auto Vv = [&](int64_t bi, int64_t gr, int64_t j, int64_t c) { return G.Vi(qkv, bi, gr, j, c); };
  const int64_t per = G.al / G.gl;
  // Exact causal probabilities of one (batch, head, query) row.
  auto probs = [&](int64_t bi, int64_t h, int64_t i, std::vector<double>& p) {
    p.assign(static_cast<size_t>(i + 1), 0.0);
    double mx = -1e300;
    for (int64_t j = 0; j <= i; ++j) {
      double sc = 0;
      for (int64_t c = 0; c < G.d; ++c) sc += Q(bi, h, i, c) * K(bi, h / per, j, c);
      p[static_cast<size_t>(j)] = sc * scale;
      mx = std::max(mx, sc * scale);
    }
    double sum = 0;
    for (auto& x : p) sum += (x = std::exp(x - mx));
    for (auto& x : p) x /= sum;
    return mx + std::log(sum);
  };
  std::vector<double> p;
  if (op.kind == OpKind::attention_fwd) {
    (void)a;
    sample(G.b * G.al * G.s, [&](int64_t e) {
      const int64_t bi = e / (G.al * G.s), h = e / G.s % G.al, i = e % G.s;
      const double lse = probs(bi, h, i, p);
      check(1, (bi * G.al + h) * G.s + i, lse);
      for (int64_t c = 0; c < G.d; ++c) {
        double o2 = 0;
        for (int64_t j = 0; j <= i; ++j) o2 += p[static_cast<size_t>(j)] * Vv(bi, h / per, j, c);
        check(0, (i * G.b + bi) * G.cc + h * G.d + c, o2);
      }
    });
    return;
  }
  // Backward (own block): dV_j = sum P_ij dO_i; dS_ij = P_ij (dO_i.V_j - D_i); dQ = scale dS K; dK = scale dS^T Q.
  const auto& ctx = R[1];
  const auto& dctx = R[3];
  auto dO = [&](int64_t bi, int64_t h, int64_t i, int64_t c) { return dctx[static_cast<size_t>((i * G.b + bi) * G.cc + h * G.d + c)]; };
  auto O = [&](int64_t bi, int64_t h, int64_t i, int64_t c) { return ctx[static_cast<size_t>((i * G.b + bi) * G.cc + h * G.d + c)]; };
  std::vector<double> ref(W[0].size(), 0.0);
  for (int64_t bi = 0; bi < G.b; ++bi)
    for (int64_t h = 0; h < G.al; ++h) {
      const int64_t gr = h / per;
      for (int64_t i = 0; i < G.s; ++i) {
        probs(bi, h, i, p);
        double D = 0;
        for (int64_t c = 0; c < G.d; ++c) D += dO(bi, h, i, c) * O(bi, h, i, c);
        for (int64_t j = 0; j <= i; ++j) {
          const double pj = p[static_cast<size_t>(j)];
          double dov = 0;
          for (int64_t c = 0; c < G.d; ++c) dov += dO(bi, h, i, c) * Vv(bi, gr, j, c);
          const double ds = pj * (dov - D);
          for (int64_t c = 0; c < G.d; ++c) {
            ref[static_cast<size_t>((i * G.b + bi) * G.qc + h * G.d + c)] += scale * ds * K(bi, gr, j, c);
            ref[static_cast<size_t>((j * G.b + bi) * G.qc + (G.al + gr) * G.d + c)] += scale * ds * Q(bi, h, i, c);
            ref[static_cast<size_t>((j * G.b + bi) * G.qc + (G.al + G.gl + gr) * G.d + c)] += pj * dO(bi, h, i, c);
          }
        }
      }
    }
  for (size_t e = 0; e < ref.size(); ++e) check(0, static_cast<int64_t>(e), ref[e]);
}

}  // namespace

void add_matmul_refs(RefTable& t) {
  t.add({OpKind::gemm}, gemm_ref);
  t.add({OpKind::attention_fwd, OpKind::attention_bwd}, attention_ref);
}

}  // namespace paralab::exec::verify_detail
