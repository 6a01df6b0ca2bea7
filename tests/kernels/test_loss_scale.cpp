// tests/kernels/test_loss_scale.cpp — dynamic loss scaling (Micikevicius et al. 2018; the
// algorithm of paralab's seed notes): overflow detection in every dtype, unscale, the state
// machine walked step by step (overflow -> halve and skip; 2000 clean steps -> double), and
// the sum of squares for gradient clipping (Pascanu et al. 2013).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "kernels/l2norm.hpp"
#include "kernels/loss_scale.hpp"
#include "test_util.hpp"

using namespace paralab::kernels;
using namespace paralab::kernels::test;

TEST_CASE("check_overflow flags Inf and NaN anywhere, in every dtype", "[kernels][loss_scale]") {
  Rng rng(80);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (Dtype d : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
    const int64_t n = 1037;
    CAPTURE(dtype_name(d));
    Buffer clean(rng.floats(n, -100.0, 100.0), d);
    int32_t flag = 0;
    check_overflow_cpu({clean.data(), n, d, &flag});
    CHECK(flag == 0);
    for (float bad : {inf, -inf, nan}) {
      for (int64_t pos : {int64_t(0), int64_t(517), n - 1}) {
        Buffer b = clean;
        b.set(pos, bad);
        flag = 0;
        check_overflow_cpu({b.data(), n, d, &flag});
        CHECK(flag == 1);
        // The flag is an OR: a later clean buffer does not clear it.
        check_overflow_cpu({clean.data(), n, d, &flag});
        CHECK(flag == 1);
      }
    }
    // f16 overflow at storage: 70000 does not fit and becomes Inf.
    if (d == Dtype::f16) {
      Buffer b = clean;
      b.set(3, 70000.f);
      flag = 0;
      check_overflow_cpu({b.data(), n, d, &flag});
      CHECK(flag == 1);
    }
  }
}

TEST_CASE("unscale divides by the scale and can check overflow", "[kernels][loss_scale]") {
  Rng rng(81);
  const int64_t n = 300;
  for (Dtype d : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
    auto g = random_tensor(rng, n, d, -1000.0, 1000.0);
    Buffer b = g.buf;
    const float S = 1024.f;
    int32_t flag = 0;
    unscale_cpu({b.data(), n, d, &S, &flag});
    CHECK(flag == 0);
    for (int64_t i = 0; i < n; ++i) REQUIRE(b.get(i) == round_to(d, float(g.ref[i]) / S));
    b.set(5, std::numeric_limits<float>::infinity());
    unscale_cpu({b.data(), n, d, &S, &flag});
    CHECK(flag == 1);
  }
}

TEST_CASE("loss scale state machine: backoff, skip, growth after 2000 clean steps", "[kernels][loss_scale]") {
  LossScaleState s;  // defaults: 2^16, tracker 0
  const LossScaleConfig cfg;  // 2.0, 0.5, 2000
  CHECK(s.scale == 65536.f);
  CHECK(cfg.growth_interval == 2000);
  // Overflow: halve, reset tracker, skip, clear the flag.
  s.growth_tracker = 17;
  s.found_inf = 1;
  CHECK(update_scale_cpu(&s, cfg));
  CHECK(s.scale == 32768.f);
  CHECK(s.growth_tracker == 0);
  CHECK(s.found_inf == 0);
  CHECK(s.last_step_skipped == 1);
  CHECK(s.skipped_steps == 1);
  // 1999 clean steps: no change in scale.
  for (int i = 0; i < 1999; ++i) REQUIRE_FALSE(update_scale_cpu(&s, cfg));
  CHECK(s.scale == 32768.f);
  CHECK(s.growth_tracker == 1999);
  CHECK(s.last_step_skipped == 0);
  // The 2000th clean step doubles and resets the tracker.
  CHECK_FALSE(update_scale_cpu(&s, cfg));
  CHECK(s.scale == 65536.f);
  CHECK(s.growth_tracker == 0);
  // An overflow in the middle of a run restarts the count.
  for (int i = 0; i < 1500; ++i) update_scale_cpu(&s, cfg);
  s.found_inf = 1;
  update_scale_cpu(&s, cfg);
  CHECK(s.scale == 32768.f);
  for (int i = 0; i < 1999; ++i) update_scale_cpu(&s, cfg);
  CHECK(s.scale == 32768.f);
  update_scale_cpu(&s, cfg);
  CHECK(s.scale == 65536.f);
  CHECK(s.skipped_steps == 2);
  // Consecutive overflows keep halving.
  for (int i = 0; i < 3; ++i) {
    s.found_inf = 1;
    update_scale_cpu(&s, cfg);
  }
  CHECK(s.scale == 8192.f);
}

TEST_CASE("a full loss-scaled step: check, skip, update", "[kernels][loss_scale]") {
  // Overflowing grads must leave the weights alone and halve the scale; clean grads update.
  LossScaleState s;
  std::vector<float> grad = {1.f, 2.f, std::numeric_limits<float>::infinity()};
  check_overflow_cpu({grad.data(), 3, Dtype::f32, &s.found_inf});
  CHECK(s.found_inf == 1);
  CHECK(update_scale_cpu(&s));
  CHECK(s.scale == 32768.f);
}

TEST_CASE("l2norm_sq matches a double sum, accumulates, is deterministic", "[kernels][l2norm]") {
  Rng rng(82);
  for (Dtype d : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
    for (int64_t n : {1, 7, 4096, 4097, 300001}) {
      CAPTURE(dtype_name(d), n);
      auto x = random_tensor(rng, n, d, -3.0, 3.0);
      double want = 0;
      for (double v : x.ref) want += v * v;
      float out = -1.f;
      l2norm_sq_cpu({x.buf.data(), n, d, &out, false});
      // fp32 accumulation (as specified): blocked sums keep the error near sqrt(n) ulps.
      CHECK(out == Approx(want).epsilon(1e-5));
      float acc = 2.5f;
      l2norm_sq_cpu({x.buf.data(), n, d, &acc, true});
      CHECK(acc == Approx(want + 2.5).epsilon(1e-5));
      float again = 0.f;
      l2norm_sq_cpu({x.buf.data(), n, d, &again, false});
      CHECK(again == out);
    }
  }
}
