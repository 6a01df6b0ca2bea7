// paralab tests — the calibration fits recover known parameters from synthetic measurements.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>

#include "analysis/calibration/fit.hpp"

using namespace paralab;
using namespace paralab::calib;

namespace {
// Multiplicative noise of +-`amp` (uniform), deterministic.
struct Noise {
  std::mt19937_64 rng{42};
  double amp;
  explicit Noise(double a) : amp(a) {}
  double operator()() { return 1.0 + amp * (2.0 * std::uniform_real_distribution<double>(0, 1)(rng) - 1.0); }
};
}  // namespace

TEST_CASE("relative least squares recovers an exact linear model", "[analysis][fit]") {
  // y = 3 + 2e-3 x1 + 7 x2 over values spanning six decades.
  std::vector<std::vector<double>> X;
  std::vector<double> y;
  for (double x1 : {1e2, 1e3, 1e4, 1e5, 1e6, 1e7})
    for (double x2 : {0.0, 1.0, 10.0}) {
      X.push_back({1.0, x1, x2});
      y.push_back(3 + 2e-3 * x1 + 7 * x2);
    }
  const LinearFit f = relative_least_squares(X, y);
  REQUIRE(f.coef.size() == 3);
  CHECK(f.coef[0] == Approx(3).epsilon(1e-9));
  CHECK(f.coef[1] == Approx(2e-3).epsilon(1e-9));
  CHECK(f.coef[2] == Approx(7).epsilon(1e-9));
  CHECK(f.rms_rel_error < 1e-12);
}

TEST_CASE("non-negative least squares clamps a coefficient the data push below zero", "[analysis][fit]") {
  // y = 5 x1 - 0.5 x2 exactly: unconstrained LS finds -0.5; NNLS holds it at 0 (Lawson & Hanson).
  std::vector<std::vector<double>> X;
  std::vector<double> y;
  for (int i = 1; i <= 20; ++i) {
    const double x1 = i, x2 = (i % 3) + 1;
    X.push_back({x1, x2});
    y.push_back(5 * x1 - 0.5 * x2);
  }
  const LinearFit free = relative_least_squares(X, y, false);
  CHECK(free.coef[1] == Approx(-0.5).epsilon(1e-9));
  const LinearFit nn = relative_least_squares(X, y, true);
  CHECK(nn.coef[1] == 0.0);
  CHECK(nn.clamped[1]);
  CHECK(nn.coef[0] > 0);
  CHECK_THROWS(relative_least_squares({}, {}));
  CHECK_THROWS(relative_least_squares({{1.0}}, {0.0}));
}

TEST_CASE("the GEMM fit recovers rate, per-call and packing costs", "[analysis][fit]") {
  // t = c_call b + 2mnk b / R + c_pack (mk + kn) b + c_store mn b with known values; 2 % noise.
  const double call = 4.0, R = 60e3 /* FLOP/us = 60 GFLOP/s */, pack = 0.8e-3, store = 0.5e-3;
  std::vector<GemmSample> s;
  Noise noise(0.02);
  for (int64_t m : {64, 128, 512, 1024})
    for (int64_t n : {64, 256, 768, 2048})
      for (int64_t k : {32, 64, 512, 1024})
        for (int64_t b : {1, 8}) {
          const double M = static_cast<double>(m), N = static_cast<double>(n), K = static_cast<double>(k), B = static_cast<double>(b);
          const double t = call * B + 2 * M * N * K * B / R + pack * (M * K + K * N) * B + store * M * N * B;
          s.push_back({m, n, k, b, MathMode::f32, t * noise()});
        }
  s.push_back({512, 512, 512, 1, MathMode::bf16, 1e9});  // another math mode: ignored
  const GemmFit g = fit_gemm(s, MathMode::f32);
  CHECK(g.flop_per_us == Approx(R).epsilon(0.03));
  CHECK(g.call_us == Approx(call).epsilon(0.15));
  CHECK(g.pack_us_per_elem == Approx(pack).epsilon(0.15));
  CHECK(g.store_us_per_elem == Approx(store).epsilon(0.15));
  CHECK(g.fit.rms_rel_error < 0.02);
  // A large square GEMM runs close to R; a skinny one far below.
  CHECK(g.efficiency_vs_rate(2048, 2048, 2048, 1) > 0.9);
  CHECK(g.efficiency_vs_rate(64, 64, 32, 1) < 0.5);
  CHECK_THROWS(fit_gemm(s, MathMode::f16));
}

TEST_CASE("the streaming fit recovers latency and bandwidth", "[analysis][fit]") {
  // t = 2.5 us + bytes / (8 GB/s = 8e3 B/us), 1 KiB .. 64 MiB, 3 % noise.
  std::vector<StreamSample> s;
  Noise noise(0.03);
  for (double bytes = 1024; bytes <= 64.0 * 1024 * 1024; bytes *= 2) s.push_back({"", bytes, (2.5 + bytes / 8e3) * noise()});
  const StreamFit f = fit_streaming(s);
  CHECK(f.latency_us == Approx(2.5).epsilon(0.05));
  CHECK(f.gbps() == Approx(8.0).epsilon(0.03));
  CHECK(f.predict_us(1e6) == Approx(2.5 + 1e6 / 8e3).epsilon(0.03));
}

TEST_CASE("the alpha-beta fit recovers launch, step latency and bandwidth from ring collectives", "[analysis][fit]") {
  // Hockney's model on the ring closed forms (Patarasuk & Yuan 2009; docs/network.md):
  // L = 12 us, alpha = 3 us per step, B = 5 GB/s.
  const double L = 12, alpha = 3, B = 5e3;
  std::vector<CommSample> s;
  Noise noise(0.02);
  for (CommPattern p : {CommPattern::all_reduce, CommPattern::all_gather, CommPattern::reduce_scatter, CommPattern::send_recv,
                        CommPattern::broadcast, CommPattern::all_to_all})
    for (int64_t n : {2, 4})
      for (double bytes = 64; bytes <= 16.0 * 1024 * 1024; bytes *= 4)
        s.push_back({p, n, bytes, (L + comm_steps(p, n) * alpha + comm_wire_bytes(p, n, bytes) / B) * noise()});
  const AlphaBetaFit f = fit_alpha_beta(s);
  CHECK(f.launch_us == Approx(L).epsilon(0.1));
  CHECK(f.step_us == Approx(alpha).epsilon(0.1));
  CHECK(f.gbps() == Approx(5.0).epsilon(0.03));
  CHECK(comm_reduced_bytes(CommPattern::all_gather, 4, 1000) == 0);
  CHECK(comm_reduced_bytes(CommPattern::reduce_scatter, 4, 1000) == Approx(750));
  // The closed forms themselves (docs/network.md): all-reduce 2(n-1) steps, 2(n-1)/n N.
  CHECK(comm_steps(CommPattern::all_reduce, 4) == 6);
  CHECK(comm_wire_bytes(CommPattern::all_reduce, 4, 1000) == Approx(1500));
  CHECK(comm_wire_bytes(CommPattern::all_gather, 4, 1000) == Approx(750));
  CHECK(comm_steps(CommPattern::send_recv, 4) == 1);
}

TEST_CASE("the alpha-beta fit separates a host's reduction arithmetic from its transfers", "[analysis][fit]") {
  // A CPU host: L = 2 us, alpha = 1 us per step, B = 6 GB/s on the wire, and the combining of
  // (n-1)/n of the buffer at R = 2 GB/s (CollectiveSpec::reduce_gbps) in reduce-scatters and
  // all-reduces only. The all-gathers and transfers pin B, the reducing calls then R.
  const double L = 2, alpha = 1, B = 6e3, R = 2e3;
  std::vector<CommSample> s;
  Noise noise(0.02);
  for (CommPattern p : {CommPattern::all_reduce, CommPattern::all_gather, CommPattern::reduce_scatter, CommPattern::send_recv})
    for (int64_t n : {2, 4})
      for (double bytes = 256; bytes <= 16.0 * 1024 * 1024; bytes *= 4)
        s.push_back({p, n, bytes,
                     (L + comm_steps(p, n) * alpha + comm_wire_bytes(p, n, bytes) / B + comm_reduced_bytes(p, n, bytes) / R) *
                         noise()});
  const AlphaBetaFit f = fit_alpha_beta(s);
  CHECK(f.gbps() == Approx(6.0).epsilon(0.05));
  CHECK(f.reduce_gbps() == Approx(2.0).epsilon(0.05));
  CHECK(f.predict_us(CommPattern::reduce_scatter, 2, 1 << 20) ==
        Approx(L + alpha + 0.5 * (1 << 20) / B + 0.5 * (1 << 20) / R).epsilon(0.05));
}
