// tests/exec — ring attention (context parallelism) equals full causal attention: two CP
// ranks, each holding two of the sequence's four chunks (Megatron-LM's load-balanced split:
// rank 0 chunks 0 and 3, rank 1 chunks 1 and 2), run the IR's ring steps (forward merge by
// log-sum-exp; backward with the visiting block's dK/dV travelling home and added by the
// "dkv_accumulate" cast) and match kernels/'s attention over the whole sequence.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "exec_test_util.hpp"
#include "kernels/attention.hpp"

using namespace paralab;
using namespace paralab::exec;
using namespace paralab::exec::test;

TEST_CASE("ring attention over 2 CP ranks equals causal attention over the whole sequence", "[exec][attention]") {
  CpuHarness h;
  h.scenario = scenario("cpu-cp2");
  h.shape = ModelShape::from(h.scenario);
  const ModelShape& m = h.shape;
  REQUIRE(m.cp == 2);
  REQUIRE(m.micro_batch == 1);
  const int64_t s = m.seq_local(), S = 2 * s, al = m.heads_local(), gl = m.groups_local(), d = m.head_dim;
  const int64_t qc = m.qkv_cols(), cc = m.attn_cols(), kvc = 2 * gl * d;
  const auto qkv = random_floats(static_cast<size_t>(S * qc), 11);
  const auto dctx = random_floats(static_cast<size_t>(S * cc), 12);

  // Reference over the full sequence (batch 1, so token row == position).
  auto pack = [&](const std::vector<float>& src, int64_t ld, int64_t heads, int64_t col0) {
    std::vector<float> out(static_cast<size_t>(heads * S * d));
    for (int64_t hh = 0; hh < heads; ++hh)
      for (int64_t i = 0; i < S; ++i)
        for (int64_t c = 0; c < d; ++c)
          out[static_cast<size_t>((hh * S + i) * d + c)] = src[static_cast<size_t>(i * ld + col0 + hh * d + c)];
    return out;
  };
  const auto q = pack(qkv, qc, al, 0), k = pack(qkv, qc, gl, al * d), v = pack(qkv, qc, gl, (al + gl) * d);
  const auto dout = pack(dctx, cc, al, 0);
  std::vector<float> out(q.size()), lse(static_cast<size_t>(al * S)), dq(q.size()), dk(k.size()), dv(v.size());
  kernels::AttentionFwdArgs f;
  f.q = q.data(), f.k = k.data(), f.v = v.data(), f.out = out.data(), f.lse = lse.data();
  f.batch = 1, f.heads = al, f.kv_heads = gl, f.seq = S, f.head_dim = d, f.causal = true;
  kernels::attention_fwd_cpu(f);
  kernels::AttentionBwdArgs bw;
  bw.q = q.data(), bw.k = k.data(), bw.v = v.data(), bw.out = out.data(), bw.dout = dout.data(), bw.lse = lse.data();
  bw.dq = dq.data(), bw.dk = dk.data(), bw.dv = dv.data();
  bw.batch = 1, bw.heads = al, bw.kv_heads = gl, bw.seq = S, bw.head_dim = d, bw.causal = true;
  kernels::attention_bwd_cpu(bw);

  // Per CP rank state.
  struct Rank {
    std::vector<float> qkv, kv_other, ctx, lse, dctx, dqkv, dkv_out;
  };
  Rank r[2];
  // Global position of rank c's local position i (batch 1: a row is a position).
  auto gpos = [&](int64_t c, int64_t i) { return cp_split(m, c).position(i); };
  REQUIRE(gpos(0, s - 1) == S - 1);  // rank 0 holds the first and the last chunk
  REQUIRE(gpos(1, 0) == s / 2);
  for (int64_t c = 0; c < 2; ++c) {
    for (int64_t i = 0; i < s; ++i) {
      const int64_t g = gpos(c, i);
      r[c].qkv.insert(r[c].qkv.end(), qkv.begin() + g * qc, qkv.begin() + (g + 1) * qc);
      r[c].dctx.insert(r[c].dctx.end(), dctx.begin() + g * cc, dctx.begin() + (g + 1) * cc);
    }
    // Outputs start as NaN: step 0 and the ops' own initialization must write every element.
    const float nan = std::numeric_limits<float>::quiet_NaN();
    r[c].ctx.assign(static_cast<size_t>(s * cc), nan);
    r[c].lse.assign(static_cast<size_t>(al * s), nan);
    r[c].dqkv.assign(static_cast<size_t>(s * qc), nan);
    r[c].dkv_out.assign(static_cast<size_t>(s * kvc), nan);
  }
  for (int64_t c = 0; c < 2; ++c) {  // the KV block a rank receives at step 1: the other rank's
    const Rank& o = r[1 - c];
    r[c].kv_other.resize(static_cast<size_t>(s * kvc));
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < kvc; ++j) r[c].kv_other[static_cast<size_t>(i * kvc + j)] = o.qkv[static_cast<size_t>(i * qc + al * d + j)];
  }
  auto attrs = [&](int32_t step) { return AttentionAttrs{1, al, gl, s, s, d, true, step, 2, MathMode::f32}; };
  for (int64_t c = 0; c < 2; ++c) {
    h.plan.coord.cp = c;
    for (int32_t step = 0; step < 2; ++step) {
      OpHarness x;
      x.op.kind = OpKind::attention_fwd;
      x.op.attrs = attrs(step);
      x.add_read(r[c].qkv.data(), s * qc, DType::f32);
      if (step > 0) {
        x.add_read(r[c].kv_other.data(), s * kvc, DType::f32);
        x.add_read(r[c].ctx.data(), s * cc, DType::f32);
        x.add_read(r[c].lse.data(), al * s, DType::f32);
      }
      x.add_write(r[c].ctx.data(), s * cc, DType::f32);
      x.add_write(r[c].lse.data(), al * s, DType::f32);
      auto ctx = h.ctx();
      cpu::run_attention(x.call(), ctx);
    }
    for (int32_t step = 0; step < 2; ++step) {
      OpHarness x;
      x.op.kind = OpKind::attention_bwd;
      x.op.attrs = attrs(step);
      x.add_read(r[c].qkv.data(), s * qc, DType::f32);
      x.add_read(r[c].ctx.data(), s * cc, DType::f32);
      x.add_read(r[c].lse.data(), al * s, DType::f32);
      x.add_read(r[c].dctx.data(), s * cc, DType::f32);
      if (step > 0) x.add_read(r[c].kv_other.data(), s * kvc, DType::f32);
      x.add_write(r[c].dqkv.data(), s * qc, DType::f32);
      if (step > 0) x.add_write(r[c].dkv_out.data(), s * kvc, DType::f32);
      auto ctx = h.ctx();
      cpu::run_attention(x.call(), ctx);
    }
  }
  // The visiting block's gradient goes home: rank c's own block was visited by rank 1 - c.
  for (int64_t c = 0; c < 2; ++c) {
    h.plan.coord.cp = c;
    OpHarness x;
    x.op.kind = OpKind::cast;
    x.op.name = "dkv_accumulate";
    x.op.attrs = KernelAttrs{s, kvc, 0, 0, 1, 0};
    x.add_read(r[1 - c].dkv_out.data(), s * kvc, DType::f32);
    x.add_read(r[c].dqkv.data(), s * qc, DType::f32);
    x.add_write(r[c].dqkv.data(), s * qc, DType::f32);
    auto ctx = h.ctx();
    cpu::run_kernel(x.call(), ctx);
  }

  double e_out = 0, e_lse = 0, e_dq = 0, e_dk = 0, e_dv = 0;
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t i = 0; i < s; ++i) {
      const int64_t pos = gpos(c, i);
      for (int64_t hh = 0; hh < al; ++hh) {
        e_lse = std::max(e_lse, double(std::abs(r[c].lse[static_cast<size_t>(hh * s + i)] - lse[static_cast<size_t>(hh * S + pos)])));
        for (int64_t x = 0; x < d; ++x) {
          e_out = std::max(e_out, double(std::abs(r[c].ctx[static_cast<size_t>(i * cc + hh * d + x)] - out[static_cast<size_t>((hh * S + pos) * d + x)])));
          e_dq = std::max(e_dq, double(std::abs(r[c].dqkv[static_cast<size_t>(i * qc + hh * d + x)] - dq[static_cast<size_t>((hh * S + pos) * d + x)])));
        }
      }
      for (int64_t g = 0; g < gl; ++g)
        for (int64_t x = 0; x < d; ++x) {
          e_dk = std::max(e_dk, double(std::abs(r[c].dqkv[static_cast<size_t>(i * qc + (al + g) * d + x)] - dk[static_cast<size_t>((g * S + pos) * d + x)])));
          e_dv = std::max(e_dv, double(std::abs(r[c].dqkv[static_cast<size_t>(i * qc + (al + gl + g) * d + x)] - dv[static_cast<size_t>((g * S + pos) * d + x)])));
        }
    }
  auto finite = [](const std::vector<float>& vals) {
    return std::all_of(vals.begin(), vals.end(), [](float e) { return std::isfinite(e); });
  };
  for (int64_t c = 0; c < 2; ++c) {
    CHECK(finite(r[c].ctx));
    CHECK(finite(r[c].lse));
    CHECK(finite(r[c].dqkv));
  }
  CHECK(e_out < 1e-5);
  CHECK(e_lse < 1e-5);
  CHECK(e_dq < 1e-4);
  CHECK(e_dk < 1e-4);
  CHECK(e_dv < 1e-4);
}
