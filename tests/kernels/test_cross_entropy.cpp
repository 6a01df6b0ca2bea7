// tests/kernels/test_cross_entropy.cpp — vocab-parallel cross-entropy (Megatron-LM's
// vocab_parallel_cross_entropy): the single-partition loss against a double log-softmax,
// the staged version with the vocabulary split over 2 and 4 ranks (all-reduces simulated on
// the host) equal to the single-partition one, and the backward against finite differences
// of the mean loss.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/cross_entropy.hpp"
#include "test_util.hpp"

using namespace paralab::kernels;
using namespace paralab::kernels::test;

namespace {

// -log softmax(x_r)[t_r], per row, in double.
std::vector<double> ce_ref(const std::vector<double>& x, const std::vector<int32_t>& t, int64_t R,
                           int64_t V) {
  std::vector<double> loss(R);
  for (int64_t r = 0; r < R; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t v = 0; v < V; ++v) m = std::max(m, x[r * V + v]);
    for (int64_t v = 0; v < V; ++v) s += std::exp(x[r * V + v] - m);
    loss[r] = std::log(s) + m - x[r * V + t[r]];
  }
  return loss;
}

// Runs the staged kernels over `parts` contiguous vocabulary shards, simulating the MAX and
// SUM all-reduces; returns per-row loss, mean, and dlogits (reassembled) for dloss_scale.
struct SplitResult { std::vector<float> loss; float mean; std::vector<float> dlogits; };
SplitResult run_split(const Buffer& logits, const std::vector<int32_t>& t, int64_t R, int64_t V,
                      int parts, float dloss_scale) {
  const Dtype d = logits.dtype();
  std::vector<int64_t> cut(parts + 1);
  for (int p = 0; p <= parts; ++p) cut[p] = V * p / parts;
  std::vector<Buffer> shard(parts);
  for (int p = 0; p < parts; ++p) {
    const int64_t w = cut[p + 1] - cut[p];
    shard[p] = Buffer(R * w, d);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t v = 0; v < w; ++v) shard[p].set(r * w + v, logits.get(r * V + cut[p] + v));
  }
  std::vector<float> gmax(R, -INFINITY), gsum(R, 0.f), gtgt(R, 0.f);
  for (int p = 0; p < parts; ++p) {  // (a) + all-reduce MAX
    std::vector<float> lmax(R);
    ce_local_max_cpu({shard[p].data(), lmax.data(), R, cut[p + 1] - cut[p], d});
    for (int64_t r = 0; r < R; ++r) gmax[r] = std::max(gmax[r], lmax[r]);
  }
  for (int p = 0; p < parts; ++p) {  // (b) + all-reduce SUM
    std::vector<float> s(R), tl(R);
    ce_local_sumexp_cpu({shard[p].data(), t.data(), gmax.data(), s.data(), tl.data(), R,
                         cut[p + 1] - cut[p], cut[p], d});
    for (int64_t r = 0; r < R; ++r) {
      gsum[r] += s[r];
      gtgt[r] += tl[r];
    }
  }
  SplitResult out{std::vector<float>(R), 0.f, std::vector<float>(R * V)};
  ce_loss_cpu({gmax.data(), gsum.data(), gtgt.data(), out.loss.data(), &out.mean, R});
  for (int p = 0; p < parts; ++p) {
    const int64_t w = cut[p + 1] - cut[p];
    Buffer dl(R * w, d);
    ce_bwd_cpu({shard[p].data(), t.data(), gmax.data(), gsum.data(), nullptr, dloss_scale,
                dl.data(), R, w, cut[p], d});
    for (int64_t r = 0; r < R; ++r)
      for (int64_t v = 0; v < w; ++v) out.dlogits[r * V + cut[p] + v] = dl.get(r * w + v);
  }
  return out;
}

}  // namespace

TEST_CASE("cross-entropy single partition matches -log softmax", "[kernels][cross_entropy]") {
  Rng rng(60);
  for (Dtype d : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
    for (auto [R, V] : {std::pair<int64_t, int64_t>{1, 1}, {5, 17}, {16, 1000}}) {
      CAPTURE(dtype_name(d), R, V);
      auto x = random_tensor(rng, R * V, d, -10.0, 10.0);
      std::vector<int32_t> t(R);
      for (auto& v : t) v = int32_t(rng.integer(0, V - 1));
      const auto want = ce_ref(x.ref, t, R, V);
      std::vector<float> mx(R), se(R), loss(R);
      float mean = -1.f;
      cross_entropy_fwd_cpu({x.buf.data(), t.data(), mx.data(), se.data(), loss.data(), &mean, R, V, d});
      // Loss is computed from the stored logits in fp32: error relative to the loss scale.
      CHECK(rel_err(loss, want) < 1e-5);
      double mref = 0;
      for (double l : want) mref += l;
      CHECK(mean == Approx(mref / double(R)).epsilon(1e-5).margin(1e-6));
    }
  }
}

TEST_CASE("cross-entropy split over 2 and 4 vocab partitions equals one partition", "[kernels][cross_entropy]") {
  Rng rng(61);
  for (Dtype d : {Dtype::f32, Dtype::bf16}) {
    const int64_t R = 24, V = 203;  // 203 splits unevenly
    auto x = random_tensor(rng, R * V, d, -6.0, 6.0);
    std::vector<int32_t> t(R);
    for (auto& v : t) v = int32_t(rng.integer(0, V - 1));
    const SplitResult one = run_split(x.buf, t, R, V, 1, 1.f / float(R));
    for (int parts : {2, 4}) {
      CAPTURE(dtype_name(d), parts);
      const SplitResult many = run_split(x.buf, t, R, V, parts, 1.f / float(R));
      CHECK(rel_err(many.loss, one.loss) < 1e-6);
      CHECK(many.mean == Approx(one.mean).epsilon(1e-6));
      CHECK(rel_err(many.dlogits, one.dlogits) < (d == Dtype::f32 ? 1e-6 : 1e-2));
    }
    CHECK(rel_err(one.loss, ce_ref(x.ref, t, R, V)) < 1e-5);
  }
}

TEST_CASE("cross-entropy backward matches finite differences of the mean loss", "[kernels][cross_entropy]") {
  Rng rng(62);
  const int64_t R = 6, V = 11;
  auto x = random_tensor(rng, R * V, Dtype::f32, -3.0, 3.0);
  std::vector<int32_t> t(R);
  for (auto& v : t) v = int32_t(rng.integer(0, V - 1));
  const float S = 1024.f;  // loss scale: dloss_scale = S / rows
  const auto fd = fd_grad(
      [&](const std::vector<double>& v) {
        double m = 0;
        for (double l : ce_ref(v, t, R, V)) m += l;
        return S * m / double(R);
      },
      x.ref, 1e-6);
  std::vector<float> mx(R), se(R), dl(R * V);
  float mean = 0;
  cross_entropy_fwd_cpu({x.buf.data(), t.data(), mx.data(), se.data(), nullptr, &mean, R, V, Dtype::f32});
  ce_bwd_cpu({x.buf.data(), t.data(), mx.data(), se.data(), nullptr, S / float(R), dl.data(), R, V, 0,
              Dtype::f32});
  CHECK(rel_err(dl, fd) < 1e-5);
  // Per-row dloss (e.g. a loss mask) scales each row; a zero row gets zero grads.
  std::vector<float> w(R);
  for (int64_t r = 0; r < R; ++r) w[r] = r % 2 ? 0.f : float(rng.uniform(0.5, 2.0));
  std::vector<float> dl2(R * V);
  ce_bwd_cpu({x.buf.data(), t.data(), mx.data(), se.data(), w.data(), S / float(R), dl2.data(), R,
              V, 0, Dtype::f32});
  for (int64_t r = 0; r < R; ++r)
    for (int64_t v = 0; v < V; ++v) REQUIRE(dl2[r * V + v] == Approx(dl[r * V + v] * w[r]).margin(1e-6));
  // Each row of dlogits sums to ~0 (softmax sums to 1, minus the one-hot).
  for (int64_t r = 0; r < R; ++r) {
    double s = 0;
    for (int64_t v = 0; v < V; ++v) s += dl[r * V + v];
    CHECK(s == Approx(0.0).margin(1e-4));
  }
}
