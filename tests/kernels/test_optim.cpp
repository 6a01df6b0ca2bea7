// tests/kernels/test_optim.cpp — AdamW (Kingma & Ba 2015 bias correction, Loshchilov &
// Hutter 2019 decoupled decay) and SGD with momentum (Sutskever et al. 2013, PyTorch form)
// against textbook double-precision implementations over several steps; grad multiplier and
// loss-scale unscaling; skipped steps on overflow; model-dtype copies of the weights.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/adamw.hpp"
#include "kernels/sgd.hpp"
#include "test_util.hpp"

using namespace paralab::kernels;
using namespace paralab::kernels::test;

namespace {

// Loshchilov & Hutter 2019, Algorithm 2 (AdamW), with eta_t = 1 and alpha = lr, written
// straight from the paper in double:
//   m_t = b1 m + (1-b1) g;  v_t = b2 v + (1-b2) g^2;  mhat = m_t/(1-b1^t);  vhat = v_t/(1-b2^t)
//   theta_t = theta - lr (mhat / (sqrt(vhat) + eps) + lambda theta)     (lambda = wd)
struct AdamRef {
  std::vector<double> th, m, v;
  void step(const std::vector<double>& g, int t, double lr, double b1, double b2, double eps,
            double wd) {
    for (size_t i = 0; i < th.size(); ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      const double mh = m[i] / (1 - std::pow(b1, t)), vh = v[i] / (1 - std::pow(b2, t));
      th[i] = th[i] - lr * (mh / (std::sqrt(vh) + eps) + wd * th[i]);
    }
  }
};

// The step's buffers (fp32 master and moments, grads in `gd`, bf16 weights copy) as AdamWArgs.
AdamWArgs adamw_buffers(std::vector<float>& master, std::vector<float>& m, std::vector<float>& v, const void* grad,
                        Dtype gd, Buffer& param) {
  AdamWArgs a;
  a.master = master.data();
  a.exp_avg = m.data();
  a.exp_avg_sq = v.data();
  a.grad = grad;
  a.grad_dtype = gd;
  a.param = param.data();
  a.param_dtype = Dtype::bf16;
  a.n = static_cast<int64_t>(master.size());
  return a;
}

}  // namespace

TEST_CASE("adamw matches the textbook algorithm over several steps", "[kernels][adamw]") {
  Rng rng(70);
  for (Dtype gd : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
    const int64_t n = 1001;
    CAPTURE(dtype_name(gd));
    std::vector<float> master = rng.floats(n), m(n, 0.f), v(n, 0.f);
    AdamRef ref{std::vector<double>(master.begin(), master.end()), std::vector<double>(n, 0.0),
                std::vector<double>(n, 0.0)};
    const double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
    const float clip = 0.5f, S = 256.f;  // grad multiplier: clip coefficient, then 1/S
    Buffer param(n, Dtype::bf16);
    for (int t = 1; t <= 5; ++t) {
      // Scaled grads as backward produces them (S * true grad), stored in the grad dtype.
      auto g = random_tensor(rng, n, gd, -S, S);
      std::vector<double> true_g(n);
      for (int64_t i = 0; i < n; ++i) true_g[i] = g.ref[i] * clip / S;
      ref.step(true_g, t, lr, b1, b2, eps, wd);
      AdamWArgs a = adamw_buffers(master, m, v, g.buf.data(), gd, param);
      a.lr = float(lr);
      a.beta1 = float(b1);
      a.beta2 = float(b2);
      a.eps = float(eps);
      a.weight_decay = float(wd);
      a.step = t;
      a.grad_scale = clip;
      a.loss_scale = &S;
      adamw_step_cpu(a);
      CHECK(rel_err(master, ref.th) < 1e-5);
      CHECK(rel_err(m, ref.m) < 1e-5);
      CHECK(rel_err(v, ref.v) < 1e-5);
      for (int64_t i = 0; i < n; ++i) REQUIRE(param.get(i) == round_to(Dtype::bf16, master[i]));
    }
  }
}

TEST_CASE("adamw skips the step when found_inf is set", "[kernels][adamw]") {
  Rng rng(71);
  const int64_t n = 64;
  std::vector<float> master = rng.floats(n), m = rng.floats(n), v = rng.floats(n, 0.1, 1.0);
  auto g = rng.floats(n);
  const auto m0 = master, mm0 = m, v0 = v;
  std::vector<float> param(n, 9.f);
  const int32_t flag = 1;
  AdamWArgs a;
  a.master = master.data();
  a.exp_avg = m.data();
  a.exp_avg_sq = v.data();
  a.grad = g.data();
  a.param = param.data();
  a.param_dtype = Dtype::f32;
  a.n = n;
  a.found_inf = &flag;
  adamw_step_cpu(a);
  CHECK(master == m0);
  CHECK(m == mm0);
  CHECK(v == v0);
  for (float p : param) CHECK(p == 9.f);
  const int32_t clean = 0;
  a.found_inf = &clean;
  adamw_step_cpu(a);
  CHECK(master != m0);
  CHECK(param == master);
}

TEST_CASE("sgd with momentum, nesterov and weight decay matches PyTorch's formula", "[kernels][sgd]") {
  Rng rng(72);
  struct Cfg { float mom, damp, wd; bool nesterov; };
  for (Cfg c : {Cfg{0.f, 0.f, 0.f, false}, Cfg{0.9f, 0.f, 1e-2f, false}, Cfg{0.9f, 0.1f, 0.f, false},
                Cfg{0.8f, 0.f, 5e-3f, true}}) {
    CAPTURE(c.mom, c.damp, c.wd, c.nesterov);
    const int64_t n = 513;
    std::vector<float> master = rng.floats(n), buf(n, 0.f);
    std::vector<double> th(master.begin(), master.end()), b(n, 0.0);
    const double lr = 0.05;
    for (int t = 1; t <= 4; ++t) {
      auto g = random_tensor(rng, n, Dtype::bf16);
      for (int64_t i = 0; i < n; ++i) {
        double gi = g.ref[i] * 0.5 + c.wd * th[i];
        if (c.mom != 0) {
          b[i] = t == 1 ? gi : c.mom * b[i] + (1 - double(c.damp)) * gi;
          gi = c.nesterov ? gi + c.mom * b[i] : b[i];
        }
        th[i] -= lr * gi;
      }
      SgdArgs a;
      a.master = master.data();
      a.momentum_buf = c.mom != 0 ? buf.data() : nullptr;
      a.grad = g.buf.data();
      a.grad_dtype = Dtype::bf16;
      a.n = n;
      a.lr = float(lr);
      a.momentum = c.mom;
      a.dampening = c.damp;
      a.weight_decay = c.wd;
      a.nesterov = c.nesterov;
      a.step = t;
      a.grad_scale = 0.5f;
      sgd_step_cpu(a);
      CHECK(rel_err(master, th) < 1e-5);
    }
  }
}

TEST_CASE("host adamw on any number of threads is the CPU twin, bit for bit", "[kernels][adamw]") {
  Rng rng(71);
  const int64_t n = 300'007;  // several 64 Ki slices and a ragged tail
  for (Dtype gd : {Dtype::bf16, Dtype::f32}) {
    CAPTURE(dtype_name(gd));
    const std::vector<float> master0 = rng.floats(n), m0 = rng.floats(n, -0.1, 0.1), v0 = rng.floats(n, 0.0, 0.01);
    auto g = random_tensor(rng, n, gd, -4, 4);
    const float S = 128.f;
    auto run = [&](int threads, std::vector<float>& master, std::vector<float>& m, std::vector<float>& v, Buffer& param) {
      master = master0, m = m0, v = v0;
      AdamWArgs a = adamw_buffers(master, m, v, g.buf.data(), gd, param);
      a.lr = 3e-4f;
      a.beta2 = 0.95f;
      a.weight_decay = 0.1f;
      a.step = 7;
      a.grad_scale = 0.7f;
      a.loss_scale = &S;
      if (threads == 0) adamw_step_cpu(a);
      else adamw_step_host(a, threads);
    };
    std::vector<float> rm, rmo, rv;
    Buffer rp(n, Dtype::bf16);
    run(0, rm, rmo, rv, rp);
    CHECK(rm != master0);  // the step moved the weights
    for (int threads : {1, 2, 3, 8}) {
      CAPTURE(threads);
      std::vector<float> hm, hmo, hv;
      Buffer hp(n, Dtype::bf16);
      run(threads, hm, hmo, hv, hp);
      REQUIRE(hm == rm);
      REQUIRE(hmo == rmo);
      REQUIRE(hv == rv);
      for (int64_t i = 0; i < n; i += 997) REQUIRE(hp.get(i) == rp.get(i));
    }
  }
  SECTION("found_inf skips the step and a thread count below 1 is refused") {
    std::vector<float> master(10, 1.f), m(10, 0.f), v(10, 0.f), grad(10, 1.f);
    const int32_t found = 1;
    AdamWArgs a;
    a.master = master.data();
    a.exp_avg = m.data();
    a.exp_avg_sq = v.data();
    a.grad = grad.data();
    a.n = 10;
    a.found_inf = &found;
    adamw_step_host(a, 4);
    CHECK(master == std::vector<float>(10, 1.f));
    CHECK_THROWS_WITH(adamw_step_host(a, 0), Catch::Contains("threads"));
  }
}
