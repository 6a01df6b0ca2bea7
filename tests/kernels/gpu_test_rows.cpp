// tests/kernels/gpu_test_rows.cpp — [gpu] row-reduction CUDA kernels against their CPU twins
// on random inputs: LayerNorm and RMSNorm (incl. deterministic param-grad reductions and
// accumulation), scaled masked softmax (causal, explicit mask, fully masked rows), the
// vocab-parallel cross-entropy stages, and the embedding lookup / scatter-add.
#include <catch2/catch.hpp>

#include "gpu_test_util.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/embedding.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/softmax.hpp"

using namespace paralab::kernels;
using namespace paralab::kernels::test;

namespace {
const Dtype kDtypes[] = {Dtype::f32, Dtype::bf16, Dtype::f16};
struct RC { int64_t rows, cols; };
// Widths around the block sizes (32..1024 threads) and a row count past the 2^20 grid cap.
const RC kShapes[] = {{1, 1}, {5, 31}, {7, 1000}, {33, 4097}, {4, 12288}, {(1 << 20) + 3, 2}};
}  // namespace

TEST_CASE("gpu layernorm forward/backward match the CPU twin", "[gpu][kernels][layernorm]") {
  Rng rng(110);
  for (Dtype d : kDtypes) {
    for (RC s : kShapes) {
      CAPTURE(dtype_name(d), s.rows, s.cols);
      const int64_t n = s.rows * s.cols, R = s.rows, C = s.cols;
      auto x = random_tensor(rng, n, d, 1.0, 3.0);
      auto g = random_tensor(rng, C, d, 0.5, 1.5);
      auto b = random_tensor(rng, C, d);
      auto dy = random_tensor(rng, n, d);
      Buffer y(n, d), dx(n, d);
      std::vector<float> mean(R), rstd(R), dg(C, 0.25f), db(C, -0.25f);
      layernorm_fwd_cpu({x.buf.data(), g.buf.data(), b.buf.data(), y.data(), mean.data(), rstd.data(), R, C, 1e-5f, d});
      layernorm_bwd_cpu({dy.buf.data(), x.buf.data(), g.buf.data(), mean.data(), rstd.data(), dx.data(),
                         dg.data(), db.data(), true, R, C, d});
      DevBuf dX(x.buf), dG(g.buf), dB(b.buf), dDY(dy.buf), dY(y.bytes()), dDX(dx.bytes());
      DevBuf dMean(static_cast<size_t>(R) * 4), dRstd(static_cast<size_t>(R) * 4);
      DevBuf dDG(std::vector<float>(C, 0.25f)), dDB(std::vector<float>(C, -0.25f));
      layernorm_fwd_cuda({dX.get(), dG.get(), dB.get(), dY.get(), dMean.f(), dRstd.f(), R, C, 1e-5f, d}, nullptr);
      layernorm_bwd_cuda({dDY.get(), dX.get(), dG.get(), dMean.f(), dRstd.f(), dDX.get(), dDG.f(), dDB.f(),
                          true, R, C, d}, nullptr);
      CHECK(rel_err(dev_f32(dY, n, d), y.f32()) <= gpu_tol(d));
      CHECK(rel_err(dMean.to_vector<float>(), mean) <= 1e-5);
      CHECK(rel_err(dRstd.to_vector<float>(), rstd) <= 1e-5);
      CHECK(rel_err(dev_f32(dDX, n, d), dx.f32()) <= gpu_tol(d));
      // Param grads sum over rows in fp32 in different orders on CPU and GPU; past ~10^5 rows
      // the two roundings drift apart by more than 1e-5 (both are fp32 sums, as specified).
      const double red_tol = R > 100000 ? 1e-3 : 1e-5;
      CHECK(rel_err(dDG.to_vector<float>(), dg) <= red_tol);
      CHECK(rel_err(dDB.to_vector<float>(), db) <= red_tol);
      // In place backward (dx aliases dy) gives the same dx.
      DevBuf dIn(dy.buf);
      layernorm_bwd_cuda({dIn.get(), dX.get(), dG.get(), dMean.f(), dRstd.f(), dIn.get(), nullptr, nullptr,
                          false, R, C, d}, nullptr);
      CHECK(rel_err(dev_f32(dIn, n, d), dx.f32()) <= gpu_tol(d));
    }
  }
}

TEST_CASE("gpu rmsnorm forward/backward match the CPU twin", "[gpu][kernels][rmsnorm]") {
  Rng rng(111);
  for (Dtype d : kDtypes) {
    for (RC s : kShapes) {
      CAPTURE(dtype_name(d), s.rows, s.cols);
      const int64_t n = s.rows * s.cols, R = s.rows, C = s.cols;
      auto x = random_tensor(rng, n, d);
      auto g = random_tensor(rng, C, d, 0.5, 1.5);
      auto dy = random_tensor(rng, n, d);
      Buffer y(n, d), dx(n, d);
      std::vector<float> rr(R), dg(C);
      rmsnorm_fwd_cpu({x.buf.data(), g.buf.data(), y.data(), rr.data(), R, C, 1e-6f, d});
      rmsnorm_bwd_cpu({dy.buf.data(), x.buf.data(), g.buf.data(), rr.data(), dx.data(), dg.data(), false, R, C, d});
      DevBuf dX(x.buf), dG(g.buf), dDY(dy.buf), dY(y.bytes()), dDX(dx.bytes()), dRR(static_cast<size_t>(R) * 4),
          dDG(static_cast<size_t>(C) * 4);
      rmsnorm_fwd_cuda({dX.get(), dG.get(), dY.get(), dRR.f(), R, C, 1e-6f, d}, nullptr);
      rmsnorm_bwd_cuda({dDY.get(), dX.get(), dG.get(), dRR.f(), dDX.get(), dDG.f(), false, R, C, d}, nullptr);
      CHECK(rel_err(dev_f32(dY, n, d), y.f32()) <= gpu_tol(d));
      CHECK(rel_err(dRR.to_vector<float>(), rr) <= 1e-5);
      // dx = g rstd (dy - x rstd^2 mean(dy g x)) is a difference of terms of size |g dy rstd|; with
      // one column they cancel to eps / (x^2 + eps) of that size, so the error is measured
      // against the terms, not the (tiny) difference.
      {
        const auto got = dev_f32(dDX, n, d), want = dx.f32();
        const std::vector<double>& gv = g.ref, &dyv = dy.ref;
        double err = 0, scale = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double e = std::abs(double(got[size_t(i)]) - double(want[size_t(i)]));
          err = std::isnan(e) ? INFINITY : std::max(err, e);  // NaN never passes
          scale = std::max({scale, std::abs(double(want[size_t(i)])),
                            std::abs(double(gv[size_t(i % C)]) * dyv[size_t(i)] * rr[size_t(i / C)])});
        }
        CHECK(err / scale <= gpu_tol(d));
      }
      CHECK(rel_err(dDG.to_vector<float>(), dg) <= (R > 100000 ? 1e-3 : 1e-5));
    }
  }
}

TEST_CASE("gpu scaled masked softmax matches the CPU twin", "[gpu][kernels][softmax]") {
  Rng rng(112);
  struct Case { int64_t B, sq, sk, heads; bool causal, mask; };
  const Case cases[] = {{1, 1, 1, 1, false, false}, {3, 17, 17, 1, true, false},
                        {8, 33, 100, 4, true, true}, {4, 64, 2048, 2, true, false},
                        {2, 9, 5, 1, true, false},   {6, 31, 300, 3, false, true}};
  for (Dtype d : kDtypes) {
    for (const Case& c : cases) {
      CAPTURE(dtype_name(d), c.B, c.sq, c.sk, c.causal, c.mask);
      const int64_t n = c.B * c.sq * c.sk;
      auto x = random_tensor(rng, n, d, -8.0, 8.0);
      auto dy = random_tensor(rng, n, d);
      std::vector<uint8_t> mask((c.B / c.heads) * c.sq * c.sk);
      for (auto& m : mask) m = rng.uniform(0, 1) < 0.4 ? 1 : 0;
      const uint8_t* mp = c.mask ? mask.data() : nullptr;
      Buffer y(n, d), dx(n, d);
      scaled_masked_softmax_fwd_cpu({x.buf.data(), y.data(), mp, c.B, c.sq, c.sk, c.heads, 0.125f, c.causal, d});
      scaled_masked_softmax_bwd_cpu({dy.buf.data(), y.data(), dx.data(), c.B, c.sq, c.sk, 0.125f, d});
      DevBuf dX(x.buf), dDY(dy.buf), dM(mask), dY(y.bytes()), dDX(dx.bytes());
      scaled_masked_softmax_fwd_cuda({dX.get(), dY.get(), c.mask ? dM.as<uint8_t>() : nullptr, c.B, c.sq,
                                      c.sk, c.heads, 0.125f, c.causal, d}, nullptr);
      // Backward from the CPU forward's y, so the two backwards see identical inputs.
      DevBuf dYc(y);
      scaled_masked_softmax_bwd_cuda({dDY.get(), dYc.get(), dDX.get(), c.B, c.sq, c.sk, 0.125f, d}, nullptr);
      CHECK(rel_err(dev_f32(dY, n, d), y.f32()) <= gpu_tol(d));
      CHECK(rel_err(dev_f32(dDX, n, d), dx.f32()) <= gpu_tol(d));
    }
  }
}

TEST_CASE("gpu cross-entropy stages match the CPU twin", "[gpu][kernels][cross_entropy]") {
  Rng rng(113);
  for (Dtype d : kDtypes) {
    for (RC s : {RC{1, 1}, RC{7, 33}, RC{64, 5003}, RC{9, 32000}}) {
      CAPTURE(dtype_name(d), s.rows, s.cols);
      const int64_t R = s.rows, V = s.cols, vs = 1000;  // local shard [1000, 1000 + V)
      auto x = random_tensor(rng, R * V, d, -10.0, 10.0);
      std::vector<int32_t> t(R);
      for (auto& v : t) v = int32_t(rng.integer(0, vs + 2 * V));  // some local, some not
      std::vector<float> mx(R), se(R), tl(R), loss(R), dloss(R);
      for (auto& w : dloss) w = float(rng.uniform(0.1, 1.0));
      float mean = 0;
      Buffer dl(R * V, d);
      ce_local_max_cpu({x.buf.data(), mx.data(), R, V, d});
      ce_local_sumexp_cpu({x.buf.data(), t.data(), mx.data(), se.data(), tl.data(), R, V, vs, d});
      ce_loss_cpu({mx.data(), se.data(), tl.data(), loss.data(), &mean, R});
      ce_bwd_cpu({x.buf.data(), t.data(), mx.data(), se.data(), dloss.data(), 0.5f, dl.data(), R, V, vs, d});

      DevBuf dX(x.buf), dT(t), dMX(static_cast<size_t>(R) * 4), dSE(static_cast<size_t>(R) * 4), dTL(static_cast<size_t>(R) * 4),
          dLoss(static_cast<size_t>(R) * 4), dMean(4), dDL(dl.bytes()), dW(dloss);
      ce_local_max_cuda({dX.get(), dMX.f(), R, V, d}, nullptr);
      ce_local_sumexp_cuda({dX.get(), dT.as<int32_t>(), dMX.f(), dSE.f(), dTL.f(), R, V, vs, d}, nullptr);
      ce_loss_cuda({dMX.f(), dSE.f(), dTL.f(), dLoss.f(), dMean.f(), R}, nullptr);
      ce_bwd_cuda({dX.get(), dT.as<int32_t>(), dMX.f(), dSE.f(), dW.f(), 0.5f, dDL.get(), R, V, vs, d}, nullptr);
      CHECK(dMX.to_vector<float>() == mx);  // max is exact
      CHECK(rel_err(dSE.to_vector<float>(), se) <= 1e-5);
      CHECK(dTL.to_vector<float>() == tl);  // a copied logit (or 0)
      CHECK(rel_err(dLoss.to_vector<float>(), loss) <= 1e-5);
      CHECK(dMean.to_vector<float>()[0] == Approx(mean).epsilon(1e-5));
      CHECK(rel_err(dev_f32(dDL, R * V, d), dl.f32()) <= gpu_tol(d));
    }
  }
}

TEST_CASE("gpu single-partition cross-entropy matches the CPU twin", "[gpu][kernels][cross_entropy]") {
  Rng rng(114);
  const int64_t R = 37, V = 1001;
  auto x = random_tensor(rng, R * V, Dtype::bf16, -5.0, 5.0);
  std::vector<int32_t> t(R);
  for (auto& v : t) v = int32_t(rng.integer(0, V - 1));
  std::vector<float> mx(R), se(R), loss(R);
  float mean = 0;
  cross_entropy_fwd_cpu({x.buf.data(), t.data(), mx.data(), se.data(), loss.data(), &mean, R, V, Dtype::bf16});
  DevBuf dX(x.buf), dT(t), dMX(static_cast<size_t>(R) * 4), dSE(static_cast<size_t>(R) * 4), dLoss(static_cast<size_t>(R) * 4), dMean(4);
  cross_entropy_fwd_cuda({dX.get(), dT.as<int32_t>(), dMX.f(), dSE.f(), dLoss.f(), dMean.f(), R, V, Dtype::bf16},
                         nullptr);
  CHECK(rel_err(dLoss.to_vector<float>(), loss) <= 1e-5);
  CHECK(dMean.to_vector<float>()[0] == Approx(mean).epsilon(1e-5));
}

TEST_CASE("gpu embedding lookup and scatter-add match the CPU twin", "[gpu][kernels][embedding]") {
  Rng rng(115);
  for (Dtype d : kDtypes) {
    for (RC s : {RC{1, 1}, RC{50, 33}, RC{1000, 1024}, RC{4097, 100}}) {
      CAPTURE(dtype_name(d), s.rows, s.cols);
      const int64_t R = s.rows, H = s.cols, V = 97, vs = 20, ve = 80;
      std::vector<int32_t> ids(R);
      for (auto& id : ids) id = int32_t(rng.integer(0, V - 1));
      auto table = random_tensor(rng, (ve - vs) * H, d);
      auto dout = random_tensor(rng, R * H, d);
      Buffer out(R * H, d);
      std::vector<float> dt((ve - vs) * H, 1.f);
      embedding_fwd_cpu({ids.data(), table.buf.data(), out.data(), R, H, vs, ve, d});
      embedding_bwd_cpu({ids.data(), dout.buf.data(), dt.data(), true, R, H, vs, ve, d});
      DevBuf dI(ids), dTab(table.buf), dOut(out.bytes()), dDO(dout.buf), dDT(std::vector<float>((ve - vs) * H, 1.f));
      embedding_fwd_cuda({dI.as<int32_t>(), dTab.get(), dOut.get(), R, H, vs, ve, d}, nullptr);
      embedding_bwd_cuda({dI.as<int32_t>(), dDO.get(), dDT.f(), true, R, H, vs, ve, d}, nullptr);
      CHECK(dOut.to_buffer(R * H, d).raw() == out.raw());  // a copy: bit-exact
      // Atomics add repeated ids in any order: fp32 sums agree to rounding.
      CHECK(rel_err(dDT.to_vector<float>(), dt) <= 1e-5);
      // accumulate = false zeroes first.
      embedding_bwd_cpu({ids.data(), dout.buf.data(), dt.data(), false, R, H, vs, ve, d});
      embedding_bwd_cuda({dI.as<int32_t>(), dDO.get(), dDT.f(), false, R, H, vs, ve, d}, nullptr);
      CHECK(rel_err(dDT.to_vector<float>(), dt) <= 1e-5);
    }
  }
}
