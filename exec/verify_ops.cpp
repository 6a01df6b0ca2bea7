// paralab exec — verification of single ops against references computed on the host in
// double precision (OpChecker, exec/verify.hpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "exec/error.hpp"
#include "exec/plan.hpp"
#include "exec/verify.hpp"
#include "exec/verify_values.hpp"
#include "ir/enum_names.hpp"
#include "kernels/dtype.hpp"
#include "kernels/rng.hpp"

namespace paralab::exec {

using namespace verify_detail;

namespace {

// Shapes every reference needs.
struct Geo {
  int64_t al, gl, d, b, s, qc, cc, V, vstart, tp;
  CpSplit cp;  // global position of a local one (load-balanced context parallelism)
};

Geo geo_of(const RankPlan& p) {
  const ModelShape& m = p.ir->shape;
  return {m.heads_local(), m.groups_local(), m.head_dim,      m.micro_batch,       m.seq_local(), m.qkv_cols(),
          m.attn_cols(),   m.vocab_local(),  p.coord.tp * m.vocab_local(), p.coord.tp, cp_split(m, p.coord.cp)};
}

double tolerance(DType t) {
  switch (t) {
    case DType::f32: return 2e-4;
    case DType::f16: return 5e-3;
    default: return 2e-2;
  }
}

// Normalized max error of `got` against `want` over the listed elements.
struct Compare {
  double err = 0, scale = 0;
  int64_t worst = -1;
  double got_w = 0, want_w = 0;
  void add(int64_t i, double got, double want) {
    scale = std::max(scale, std::abs(want));
    const double e = std::abs(got - want);
    if (!(e <= err)) {  // NaN counts as worst
      err = std::isnan(e) ? INFINITY : e;
      worst = i;
      got_w = got;
      want_w = want;
    }
  }
  [[nodiscard]] double normalized() const { return scale > 1e-30 ? err / scale : err / 1e-30 * 1e-30 + err; }
};

double gelu(double u) { return 0.5 * u * (1 + std::tanh(0.7978845608028654 * (u + 0.044715 * u * u * u))); }
double gelu_grad(double u) {
  const double t = std::tanh(0.7978845608028654 * (u + 0.044715 * u * u * u));
  return 0.5 * (1 + t) + 0.5 * u * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * u * u);
}
double sigmoid(double a) { return 1 / (1 + std::exp(-a)); }

}  // namespace

OpChecker::OpChecker(const RankPlan& plan, Backend& backend, int64_t every) : plan_(plan), backend_(backend) {
  const StepGraph& g = *plan.graph;
  sampled_.assign(g.ops.size(), 0);
  std::map<std::string, int> seen;
  int64_t counter = 0;
  for (const Op& op : g.ops) {
    std::string key(enum_to_string(op.kind));
    if (const auto* gm = op.gemm()) key += "." + std::string(to_string(gm->role));
    key += std::string(".") + op.name;
    bool has_ref = !is_comm(op.kind) && op.kind != OpKind::scaler_update && op.kind != OpKind::overflow_check &&
                   (op.kind != OpKind::cast || std::string_view(op.name) == "grad_accumulate");
    if (const auto* a = op.attention()) has_ref &= a->cp_size == 1;
    if (!has_ref) continue;
    if (seen[key]++ == 0 || ++counter % every == 0) sampled_[op.id] = 1;
  }
}

bool OpChecker::wants(const Op& op) { return sampled_[op.id] != 0; }

void OpChecker::before(const OpCall& call) {
  Snapshot s;
  for (size_t i = 0; i < call.reads.size(); ++i)
    s.reads.push_back(to_doubles(backend_, call.reads[i], call.plan.reads[i].dtype, call.plan.reads[i].numel));
  for (size_t i = 0; i < call.writes.size(); ++i)
    s.writes.push_back(to_doubles(backend_, call.writes[i], call.plan.writes[i].dtype, call.plan.writes[i].numel));
  std::lock_guard lk(mu_);
  snaps_[call.op.id] = std::move(s);
}

void OpChecker::after(const OpCall& call) {
  Snapshot s;
  {
    std::lock_guard lk(mu_);
    s = std::move(snaps_.at(call.op.id));
    snaps_.erase(call.op.id);
  }
  const Op& op = call.op;
  const OpPlan& o = call.plan;
  const Geo G = geo_of(plan_);
  const auto& R = s.reads;
  const auto& W0 = s.writes;  // outputs before the op
  std::vector<std::vector<double>> W;  // outputs after
  for (size_t i = 0; i < call.writes.size(); ++i)
    W.push_back(to_doubles(backend_, call.writes[i], o.writes[i].dtype, o.writes[i].numel));

  // Each reference fills `cmp[w]` for output w over the elements it checks.
  std::vector<Compare> cmp(W.size());
  auto check = [&](size_t w, int64_t i, double want) { cmp[w].add(i, W[w][static_cast<size_t>(i)], want); };
  // Sample at most ~4096 elements of a large output (the cost of a reference element can be O(k)).
  auto sample = [](int64_t n, const std::function<void(int64_t)>& f) {
    const int64_t stride = std::max<int64_t>(1, n / 4096);
    for (int64_t i = 0; i < n; i += stride) f(i);
    if (n > 0 && (n - 1) % stride != 0) f(n - 1);
  };

  // The fused QKV layout [s*b rows, (a/t + 2 g/t) heads x d]: query head h, key and value group
  // gr of token i (row i*b + bi), element c.
  auto Qi = [&](const std::vector<double>& qkv, int64_t bi, int64_t h, int64_t i, int64_t c) {
    return qkv[static_cast<size_t>((i * G.b + bi) * G.qc + h * G.d + c)];
  };
  auto Ki = [&](const std::vector<double>& qkv, int64_t bi, int64_t gr, int64_t j, int64_t c) {
    return qkv[static_cast<size_t>((j * G.b + bi) * G.qc + (G.al + gr) * G.d + c)];
  };
  auto Vi = [&](const std::vector<double>& qkv, int64_t bi, int64_t gr, int64_t j, int64_t c) {
    return qkv[static_cast<size_t>((j * G.b + bi) * G.qc + (G.al + G.gl + gr) * G.d + c)];
  };

  switch (op.kind) {
    case OpKind::gemm: {
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
              scores([&](int64_t bi, int64_t h, int64_t i, int64_t c) { return Qi(R[0], bi, h, i, c); },
                     [&](int64_t bi, int64_t gr, int64_t j, int64_t c) { return Ki(R[0], bi, gr, j, c); });
              break;
            case GemmRole::attn_pv:
            case GemmRole::attn_dp:
              if (g.role == GemmRole::attn_pv)
                sample(G.s * G.b * G.cc, [&](int64_t e) {
                  const int64_t row = e / G.cc, col = e % G.cc, i = row / G.b, bi = row % G.b, h = col / G.d, c = col % G.d;
                  double acc = 0;
                  for (int64_t j = 0; j < G.s; ++j) acc += Sq(R[0], bi * G.al + h, i, j) * Vi(R[1], bi, h / per, j, c);
                  check(0, e, acc);
                });
              else
                scores([&](int64_t bi, int64_t h, int64_t i, int64_t c) { return Ci(R[0], bi, h, i, c); },
                       [&](int64_t bi, int64_t gr, int64_t j, int64_t c) { return Vi(R[1], bi, gr, j, c); });
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
                  for (int64_t j = 0; j < G.s; ++j) acc += Sq(R[0], bi * G.al + hh, i, j) * Ki(R[1], bi, hh / per, j, c);
                } else {
                  for (int64_t h = hh * per; h < (hh + 1) * per; ++h)
                    for (int64_t q = 0; q < G.s; ++q)  // this output row is key/value position i
                      acc += Sq(R[0], bi * G.al + h, q, i) * (part == 1 ? Qi(R[1], bi, h, q, c) : Ci(R[1], bi, h, q, c));
                }
                check(0, row * G.qc + col0 + hc, acc);
              });
              break;
            }
            default: break;
          }
        }
      }
      break;
    }
    case OpKind::attention_fwd:
    case OpKind::attention_bwd: {
      const AttentionAttrs& a = *op.attention();
      const double scale = 1.0 / std::sqrt(static_cast<double>(G.d));
      const auto& qkv = R[0];
      auto Q = [&](int64_t bi, int64_t h, int64_t i, int64_t c) { return Qi(qkv, bi, h, i, c); };
      auto K = [&](int64_t bi, int64_t gr, int64_t j, int64_t c) { return Ki(qkv, bi, gr, j, c); };
      auto Vv = [&](int64_t bi, int64_t gr, int64_t j, int64_t c) { return Vi(qkv, bi, gr, j, c); };
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
        break;
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
      break;
    }
    case OpKind::layernorm_fwd:
    case OpKind::rmsnorm_fwd: {
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
      break;
    }
    case OpKind::layernorm_bwd:
    case OpKind::rmsnorm_bwd: {
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
      break;
    }
    case OpKind::gelu_fwd:
    case OpKind::gelu_bwd:
    case OpKind::swiglu_fwd:
    case OpKind::swiglu_bwd: {
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
      break;
    }
    case OpKind::softmax_fwd:
    case OpKind::softmax_bwd: {
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
      break;
    }
    case OpKind::dropout_fwd:
    case OpKind::dropout_bwd:
    case OpKind::dropout_add_fwd:
    case OpKind::dropout_add_bwd: {
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
        report_.add("ops.dropout_mask", ok, std::abs(frac - (1 - k.p)),
                    "rank " + std::to_string(plan_.rank) + ": op " + op_label(op) + " kept " + std::to_string(frac) +
                        " of its elements, expected " + std::to_string(1 - k.p));
      }
      break;
    }
    case OpKind::rope_fwd:
    case OpKind::rope_bwd: {
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
      break;
    }
    case OpKind::embedding_fwd:
    case OpKind::embedding_bwd: {
      const KernelAttrs& k = *op.kernel();
      const int64_t h = k.cols;
      if (op.kind == OpKind::embedding_fwd) {
        const auto [add0, add1] = position_add_rows(plan_, k.rows);  // this rank's share of the positions
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
        const auto [own0, own1] = position_grad_rows(plan_, k.rows);
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
      break;
    }
    case OpKind::xent_max:
    case OpKind::xent_sum:
    case OpKind::xent_loss:
    case OpKind::xent_bwd: {
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
            const double g = xent_grad_scale(plan_, k);
            const int64_t local = static_cast<int64_t>(R[2][static_cast<size_t>(r)]) - G.vstart;
            for (int64_t v = 0; v < V; ++v)
              check(0, r * V + v, (R[0][static_cast<size_t>(r * V + v)] / R[1][static_cast<size_t>(2 * r)] - (v == local ? 1.0 : 0.0)) * g);
          }
        }
      }
      break;
    }
    case OpKind::cast:  // grad_accumulate: the gradient view += the fresh gradient
      for (size_t e = 0; e < W[0].size(); ++e) check(0, static_cast<int64_t>(e), W0[0][e] + R[0][e]);
      break;
    case OpKind::grad_norm: {
      double sum = W0[0][0];
      for (double x : R[0]) sum += x * x;
      check(0, 0, sum);
      break;
    }
    case OpKind::optimizer_step: {
      const TrainingConfig& t = plan_.ir->scenario.training;
      const bool mixed = is_mixed(t.precision), adam = t.optimizer == Optimizer::adam;
      const bool fp16 = t.precision == Precision::fp16, clip = t.clip_grad > 0;
      size_t ri = 2 + mixed + adam;
      const bool skip = fp16 && R[ri++][0] > 0;
      double gs = 1;
      if (clip) gs = std::min(1.0, t.clip_grad / (std::sqrt(R[ri++][0]) + 1e-6));
      if (fp16) break;  // the loss scale lives in the backend; fp16 steps are checked for finiteness only
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
      break;
    }
    default: break;
  }

  for (size_t w = 0; w < cmp.size(); ++w) {
    if (cmp[w].worst < 0 && cmp[w].err == 0 && cmp[w].scale == 0) continue;  // output not checked
    const double err = cmp[w].scale > 1e-30 ? cmp[w].err / cmp[w].scale : cmp[w].err;
    const double tol = tolerance(o.writes[w].dtype);
    const bool ok = err <= tol;
    std::string msg;
    if (!ok)
      msg = "rank " + std::to_string(plan_.rank) + ": op " + op_label(op) + " output " + std::to_string(w) +
            ": normalized error " + std::to_string(err) + " > " + std::to_string(tol) + " (element " +
            std::to_string(cmp[w].worst) + ": got " + std::to_string(cmp[w].got_w) + ", reference " +
            std::to_string(cmp[w].want_w) + ")";
    std::lock_guard lk(mu_);
    report_.add("ops." + std::string(enum_to_string(op.kind)), ok, err, msg);
  }
}

VerifyReport OpChecker::report() const {
  std::lock_guard lk(mu_);
  return report_;
}

}  // namespace paralab::exec
