// tests/kernels/test_attention.cpp — CPU reference attention (Vaswani et al. 2017 Eq. 1,
// GQA per Ainslie et al. 2023, lse as in Dao et al. 2022): forward against a naive double
// implementation (causal and not, MHA and GQA, all dtypes); backward against central
// finite differences of the double forward.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/attention.hpp"
#include "test_util.hpp"

using namespace paralab::kernels;
using namespace paralab::kernels::test;

namespace {

struct Dims { int64_t b, h, hkv, s, d; bool causal; };

// Naive double attention; returns out and fills lse.
std::vector<double> attn_ref(const std::vector<double>& q, const std::vector<double>& k,
                             const std::vector<double>& v, const Dims& c, double scale,
                             std::vector<double>* lse = nullptr) {
  std::vector<double> o(q.size(), 0.0);
  const int64_t grp = c.h / c.hkv;
  for (int64_t n = 0; n < c.b; ++n)
    for (int64_t h = 0; h < c.h; ++h) {
      const int64_t qo = (n * c.h + h) * c.s * c.d, ko = (n * c.hkv + h / grp) * c.s * c.d;
      for (int64_t i = 0; i < c.s; ++i) {
        const int64_t jn = c.causal ? i + 1 : c.s;
        std::vector<double> sc(jn);
        double m = -INFINITY;
        for (int64_t j = 0; j < jn; ++j) {
          double dd = 0;
          for (int64_t e = 0; e < c.d; ++e) dd += q[qo + i * c.d + e] * k[ko + j * c.d + e];
          sc[j] = scale * dd;
          m = std::max(m, sc[j]);
        }
        double l = 0;
        for (int64_t j = 0; j < jn; ++j) l += std::exp(sc[j] - m);
        for (int64_t j = 0; j < jn; ++j) {
          const double p = std::exp(sc[j] - m) / l;
          for (int64_t e = 0; e < c.d; ++e) o[qo + i * c.d + e] += p * v[ko + j * c.d + e];
        }
        if (lse) (*lse)[(n * c.h + h) * c.s + i] = m + std::log(l);
      }
    }
  return o;
}

}  // namespace

TEST_CASE("attention forward matches naive double attention", "[kernels][attention]") {
  Rng rng(90);
  const Dims cases[] = {{1, 1, 1, 1, 1, true},   {2, 2, 2, 5, 8, true},  {1, 4, 2, 9, 16, true},
                        {2, 6, 2, 7, 12, false}, {1, 2, 1, 33, 64, true}};
  for (Dtype dt : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
    for (const Dims& c : cases) {
      CAPTURE(dtype_name(dt), c.b, c.h, c.hkv, c.s, c.d, c.causal);
      auto q = random_tensor(rng, c.b * c.h * c.s * c.d, dt);
      auto k = random_tensor(rng, c.b * c.hkv * c.s * c.d, dt);
      auto v = random_tensor(rng, c.b * c.hkv * c.s * c.d, dt);
      const double scale = 1.0 / std::sqrt(double(c.d));
      std::vector<double> lse_ref(c.b * c.h * c.s);
      const auto want = attn_ref(q.ref, k.ref, v.ref, c, scale, &lse_ref);
      Buffer out(q.buf.size(), dt);
      std::vector<float> lse(c.b * c.h * c.s);
      attention_fwd_cpu({q.buf.data(), k.buf.data(), v.buf.data(), out.data(), lse.data(), c.b,
                         c.h, c.hkv, c.s, c.d, 0.f, c.causal, dt});
      CHECK(rel_err(out.f32(), want) < tol_for(dt));
      CHECK(rel_err(lse, lse_ref) < 1e-5);
    }
  }
}

TEST_CASE("attention backward matches finite differences (MHA and GQA)", "[kernels][attention]") {
  Rng rng(91);
  for (const Dims& c : {Dims{1, 2, 2, 4, 3, true}, Dims{1, 4, 2, 5, 4, true}, Dims{2, 2, 1, 3, 2, false}}) {
    CAPTURE(c.b, c.h, c.hkv, c.s, c.d, c.causal);
    const int64_t nq = c.b * c.h * c.s * c.d, nk = c.b * c.hkv * c.s * c.d;
    auto q = random_tensor(rng, nq, Dtype::f32);
    auto k = random_tensor(rng, nk, Dtype::f32);
    auto v = random_tensor(rng, nk, Dtype::f32);
    auto dout = random_tensor(rng, nq, Dtype::f32);
    const float scale = 0.7f;
    auto L = [&](const std::vector<double>& qq, const std::vector<double>& kk,
                 const std::vector<double>& vv) { return dot(dout.ref, attn_ref(qq, kk, vv, c, scale)); };
    const auto dq_fd = fd_grad([&](const std::vector<double>& x) { return L(x, k.ref, v.ref); }, q.ref);
    const auto dk_fd = fd_grad([&](const std::vector<double>& x) { return L(q.ref, x, v.ref); }, k.ref);
    const auto dv_fd = fd_grad([&](const std::vector<double>& x) { return L(q.ref, k.ref, x); }, v.ref);
    std::vector<float> out(nq), lse(c.b * c.h * c.s), dq(nq), dk(nk), dv(nk);
    attention_fwd_cpu({q.buf.data(), k.buf.data(), v.buf.data(), out.data(), lse.data(), c.b, c.h,
                       c.hkv, c.s, c.d, scale, c.causal, Dtype::f32});
    attention_bwd_cpu({q.buf.data(), k.buf.data(), v.buf.data(), out.data(), dout.buf.data(),
                       lse.data(), dq.data(), dk.data(), dv.data(), c.b, c.h, c.hkv, c.s, c.d, scale,
                       c.causal, Dtype::f32});
    CHECK(rel_err(dq, dq_fd) < 1e-4);
    CHECK(rel_err(dk, dk_fd) < 1e-4);
    CHECK(rel_err(dv, dv_fd) < 1e-4);
  }
}

TEST_CASE("attention scale 0 means 1/sqrt(head_dim)", "[kernels][attention]") {
  CHECK(attention_scale(0.f, 64) == 0.125f);
  CHECK(attention_scale(0.3f, 64) == 0.3f);
}
