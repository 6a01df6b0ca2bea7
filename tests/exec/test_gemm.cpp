// tests/exec — the CPU backend's GEMMs against naive loops: linear roles (transposes, bias
// epilogue, bias gradient, accumulation) in fp32 and bf16 storage, and the unfused attention's
// batched GEMMs on strided views of qkv with micro-batch 2 and grouped-query attention.
#include <catch2/catch.hpp>

#include <cmath>

#include "exec_test_util.hpp"

using namespace paralab;
using namespace paralab::exec;
using namespace paralab::exec::test;

namespace {

double max_rel_err(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return err / scale;
}

}  // namespace

TEST_CASE("linear GEMMs: every transpose combination, bias, bias gradient, accumulate", "[exec][gemm]") {
  CpuHarness h;
  const int64_t m = 37, n = 29, k = 41;
  for (DType t : {DType::f32, DType::bf16}) {
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (int acc = 0; acc < 2; ++acc) {
          CAPTURE(t == DType::f32 ? "f32" : "bf16", ta, tb, acc);
          const auto a = random_floats(static_cast<size_t>(m * k), 1), b = random_floats(static_cast<size_t>(k * n), 2);
          const auto c0 = random_floats(static_cast<size_t>(m * n), 3), bias = random_floats(static_cast<size_t>(n), 4);
          auto A = storage(a, t), B = storage(b, t), C = storage(c0, t), Bias = storage(bias, t), BG = storage(bias, t);
          const auto av = values(A, t), bv = values(B, t), cv = values(C, t), biasv = values(Bias, t);
          // Roles: linear_fwd with bias when not accumulating; linear_wgrad (bias gradient) when accumulating.
          const bool fwd = acc == 0;
          OpHarness x;
          GemmAttrs g;
          g.m = m, g.n = n, g.k = k, g.trans_a = ta, g.trans_b = tb, g.accumulate = acc, g.bias = true;
          g.role = fwd ? GemmRole::linear_fwd : GemmRole::linear_wgrad;
          x.op.kind = OpKind::gemm;
          x.op.attrs = g;
          x.add_read(A.data(), m * k, t);
          x.add_read(B.data(), k * n, t);
          if (fwd) x.add_read(Bias.data(), n, t);
          else x.add_read(C.data(), m * n, t);
          x.add_write(C.data(), m * n, t);
          if (!fwd) x.add_write(BG.data(), n, t);
          auto ctx = h.ctx();
          cpu::run_gemm(x.call(), ctx);
          std::vector<double> want(static_cast<size_t>(m * n));
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double s = acc ? cv[static_cast<size_t>(i * n + j)] : 0.0;
              for (int64_t l = 0; l < k; ++l)
                s += double(ta ? av[static_cast<size_t>(l * m + i)] : av[static_cast<size_t>(i * k + l)]) *
                     double(tb ? bv[static_cast<size_t>(j * k + l)] : bv[static_cast<size_t>(l * n + j)]);
              if (fwd) s += biasv[static_cast<size_t>(j)];
              want[static_cast<size_t>(i * n + j)] = s;
            }
          CHECK(max_rel_err(values(C, t), want) < (t == DType::f32 ? 1e-5 : 1e-2));
          if (!fwd) {  // bias gradient: column sums of dY = op(B) added to the old value
            std::vector<double> bw(static_cast<size_t>(n));
            for (int64_t j = 0; j < n; ++j) {
              double s = biasv[static_cast<size_t>(j)];
              for (int64_t l = 0; l < k; ++l) s += tb ? bv[static_cast<size_t>(j * k + l)] : bv[static_cast<size_t>(l * n + j)];
              bw[static_cast<size_t>(j)] = s;
            }
            CHECK(max_rel_err(values(BG, t), bw) < (t == DType::f32 ? 1e-5 : 1e-2));
          }
        }
  }
}

TEST_CASE("attention GEMMs read heads from qkv rows (position, batch entry) and sum GQA groups", "[exec][gemm]") {
  CpuHarness h;
  h.scenario = scenario("cpu-dp2-zero2", {"training.precision=fp32"});  // tiny Llama: 4 heads, 2 KV groups
  h.shape = ModelShape::from(h.scenario);
  const ModelShape& m = h.shape;
  const int64_t b = m.micro_batch, al = m.heads_local(), gl = m.groups_local(), d = m.head_dim, s = m.seq_local();
  REQUIRE(b == 2);
  REQUIRE(gl < al);
  const int64_t T = s * b, qc = m.qkv_cols(), bh = b * al;
  auto qkv = random_floats(static_cast<size_t>(T * qc), 7);
  auto Q = [&](int64_t bi, int64_t hh, int64_t i, int64_t c) { return double(qkv[static_cast<size_t>((i * b + bi) * qc + hh * d + c)]); };
  auto K = [&](int64_t bi, int64_t g, int64_t j, int64_t c) { return double(qkv[static_cast<size_t>((j * b + bi) * qc + (al + g) * d + c)]); };
  const int64_t per = al / gl;

  SECTION("attn_qk: S[b_idx * heads + head] = Q K^T of the head's group") {
    std::vector<float> S(static_cast<size_t>(bh * s * s));
    OpHarness x;
    GemmAttrs g;
    g.m = s, g.n = s, g.k = d, g.batch = bh, g.trans_b = true, g.role = GemmRole::attn_qk;
    x.op.kind = OpKind::gemm;
    x.op.attrs = g;
    x.add_read(qkv.data(), T * qc, DType::f32);
    x.add_write(S.data(), bh * s * s, DType::f32);
    auto ctx = h.ctx();
    cpu::run_gemm(x.call(), ctx);
    std::vector<double> want(S.size());
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t hh = 0; hh < al; ++hh)
        for (int64_t i = 0; i < s; ++i)
          for (int64_t j = 0; j < s; ++j) {
            double acc = 0;
            for (int64_t c = 0; c < d; ++c) acc += Q(bi, hh, i, c) * K(bi, hh / per, j, c);
            want[static_cast<size_t>(((bi * al + hh) * s + i) * s + j)] = acc;
          }
    CHECK(max_rel_err(S, want) < 1e-5);
  }
  SECTION("attn_dk: dK of a group = sum over its heads of dS^T Q, written into d_qkv's K columns") {
    auto dS = random_floats(static_cast<size_t>(bh * s * s), 8);
    std::vector<float> dqkv(static_cast<size_t>(T * qc), 123.0f);  // other columns untouched
    OpHarness x;
    GemmAttrs g;
    g.m = s, g.n = d, g.k = s, g.batch = bh, g.trans_a = true, g.role = GemmRole::attn_dk;
    x.op.kind = OpKind::gemm;
    x.op.attrs = g;
    x.add_read(dS.data(), bh * s * s, DType::f32);
    x.add_read(qkv.data(), T * qc, DType::f32);
    x.add_read(dqkv.data(), T * qc, DType::f32);
    x.add_write(dqkv.data(), T * qc, DType::f32);
    auto ctx = h.ctx();
    cpu::run_gemm(x.call(), ctx);
    double err = 0, scale = 0;
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t gg = 0; gg < gl; ++gg)
        for (int64_t j = 0; j < s; ++j)
          for (int64_t c = 0; c < d; ++c) {
            double acc = 0;
            for (int64_t hh = gg * per; hh < (gg + 1) * per; ++hh)
              for (int64_t i = 0; i < s; ++i) acc += double(dS[static_cast<size_t>(((bi * al + hh) * s + i) * s + j)]) * Q(bi, hh, i, c);
            const double got = dqkv[static_cast<size_t>((j * b + bi) * qc + (al + gg) * d + c)];
            err = std::max(err, std::abs(got - acc));
            scale = std::max(scale, std::abs(acc));
          }
    CHECK(err / scale < 1e-5);
    // Q and V columns are not this op's output.
    for (int64_t r = 0; r < T; ++r) {
      CHECK(dqkv[static_cast<size_t>(r * qc)] == 123.0f);
      CHECK(dqkv[static_cast<size_t>(r * qc + (al + gl) * d)] == 123.0f);
    }
  }
}
