// tests/kernels/gpu_test_training.cpp — [gpu] optimizer and loss-scaling kernels against
// their CPU twins: AdamW and SGD over several steps (fp32 master, bf16/f16 grads, model-dtype
// copy, device-side loss scale and skip flag), check_overflow / unscale, the device
// update_scale state machine, and the deterministic sum of squares.
#include <catch2/catch.hpp>

#include <limits>

#include "gpu_test_util.hpp"
#include "kernels/adamw.hpp"
#include "kernels/l2norm.hpp"
#include "kernels/loss_scale.hpp"
#include "kernels/sgd.hpp"

using namespace paralab::kernels;
using namespace paralab::kernels::test;

TEST_CASE("gpu adamw matches the CPU twin over several steps", "[gpu][kernels][adamw]") {
  Rng rng(120);
  for (Dtype gd : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
    for (Dtype pd : {Dtype::bf16, Dtype::f32}) {
      for (int64_t n : {1, 1000, 1000003}) {
        CAPTURE(dtype_name(gd), dtype_name(pd), n);
        std::vector<float> master = rng.floats(n), m(n, 0.f), v(n, 0.f);
        DevBuf dMaster(master), dM(m), dV(v), dParam(static_cast<size_t>(n * dtype_size(pd)));
        const float S = 512.f;
        DevBuf dS(std::vector<float>{S}), dFlag(std::vector<int32_t>{0});
        Buffer param(n, pd);
        for (int t = 1; t <= 3; ++t) {
          auto g = random_tensor(rng, n, gd, -S, S);
          DevBuf dG(g.buf);
          AdamWArgs a;
          a.master = master.data(); a.exp_avg = m.data(); a.exp_avg_sq = v.data();
          a.grad = g.buf.data(); a.grad_dtype = gd; a.param = param.data(); a.param_dtype = pd;
          a.n = n; a.lr = 3e-3f; a.beta1 = 0.9f; a.beta2 = 0.95f; a.eps = 1e-8f;
          a.weight_decay = 0.1f; a.step = t; a.grad_scale = 0.7f; a.loss_scale = &S;
          adamw_step_cpu(a);
          AdamWArgs b = a;
          b.master = dMaster.f(); b.exp_avg = dM.f(); b.exp_avg_sq = dV.f(); b.grad = dG.get();
          b.param = dParam.get(); b.loss_scale = dS.f(); b.found_inf = dFlag.as<int32_t>();
          adamw_step_cuda(b, nullptr);
        }
        CHECK(rel_err(dMaster.to_vector<float>(), master) <= 1e-5);
        CHECK(rel_err(dM.to_vector<float>(), m) <= 1e-5);
        CHECK(rel_err(dV.to_vector<float>(), v) <= 1e-5);
        CHECK(rel_err(dev_f32(dParam, n, pd), param.f32()) <= gpu_tol(pd));
        // A raised device flag skips the whole update.
        const auto before = dMaster.to_vector<float>();
        DevBuf dBad(std::vector<int32_t>{1}), dG(random_tensor(rng, n, gd).buf);
        AdamWArgs c;
        c.master = dMaster.f(); c.exp_avg = dM.f(); c.exp_avg_sq = dV.f(); c.grad = dG.get();
        c.grad_dtype = gd; c.n = n; c.step = 4; c.found_inf = dBad.as<int32_t>();
        adamw_step_cuda(c, nullptr);
        CHECK(dMaster.to_vector<float>() == before);
      }
    }
  }
}

// Optimizer offload: the host's multithreaded AdamW (the step the offloaded shard takes) against
// the device AdamW on the same random data over several steps.
TEST_CASE("host adamw matches the device adamw over several steps", "[gpu][kernels][adamw]") {
  Rng rng(122);
  const int64_t n = 1000003;
  for (Dtype gd : {Dtype::bf16, Dtype::f32}) {
    CAPTURE(dtype_name(gd));
    std::vector<float> master = rng.floats(n), m(n, 0.f), v(n, 0.f);
    DevBuf dMaster(master), dM(m), dV(v), dParam(static_cast<size_t>(n) * 2);
    Buffer param(n, Dtype::bf16);
    for (int t = 1; t <= 3; ++t) {
      auto g = random_tensor(rng, n, gd, -2, 2);
      DevBuf dG(g.buf);
      AdamWArgs a;
      a.master = master.data(); a.exp_avg = m.data(); a.exp_avg_sq = v.data();
      a.grad = g.buf.data(); a.grad_dtype = gd; a.param = param.data(); a.param_dtype = Dtype::bf16;
      a.n = n; a.lr = 3e-3f; a.beta2 = 0.95f; a.weight_decay = 0.1f; a.step = t; a.grad_scale = 0.8f;
      adamw_step_host(a, 8);
      AdamWArgs b = a;
      b.master = dMaster.f(); b.exp_avg = dM.f(); b.exp_avg_sq = dV.f(); b.grad = dG.get(); b.param = dParam.get();
      adamw_step_cuda(b, nullptr);
    }
    CHECK(rel_err(dMaster.to_vector<float>(), master) <= 1e-5);
    CHECK(rel_err(dM.to_vector<float>(), m) <= 1e-5);
    CHECK(rel_err(dV.to_vector<float>(), v) <= 1e-5);
    CHECK(rel_err(dev_f32(dParam, n, Dtype::bf16), param.f32()) <= gpu_tol(Dtype::bf16));
  }
}

TEST_CASE("gpu sgd matches the CPU twin", "[gpu][kernels][sgd]") {
  Rng rng(121);
  for (bool nesterov : {false, true}) {
    const int64_t n = 100001;
    std::vector<float> master = rng.floats(n), buf(n, 0.f);
    DevBuf dMaster(master), dBuf(buf), dParam(static_cast<size_t>(n) * 2);
    Buffer param(n, Dtype::bf16);
    for (int t = 1; t <= 3; ++t) {
      auto g = random_tensor(rng, n, Dtype::bf16);
      DevBuf dG(g.buf);
      SgdArgs a;
      a.master = master.data(); a.momentum_buf = buf.data(); a.grad = g.buf.data();
      a.grad_dtype = Dtype::bf16; a.param = param.data(); a.param_dtype = Dtype::bf16; a.n = n;
      a.lr = 0.1f; a.momentum = 0.9f; a.weight_decay = 1e-3f; a.nesterov = nesterov; a.step = t;
      sgd_step_cpu(a);
      SgdArgs b = a;
      b.master = dMaster.f(); b.momentum_buf = dBuf.f(); b.grad = dG.get(); b.param = dParam.get();
      sgd_step_cuda(b, nullptr);
    }
    CHECK(rel_err(dMaster.to_vector<float>(), master) <= 1e-5);
    CHECK(rel_err(dBuf.to_vector<float>(), buf) <= 1e-5);
    CHECK(rel_err(dev_f32(dParam, n, Dtype::bf16), param.f32()) <= 1e-2);
  }
}

TEST_CASE("gpu check_overflow and unscale match the CPU twins", "[gpu][kernels][loss_scale]") {
  Rng rng(122);
  const float inf = std::numeric_limits<float>::infinity();
  for (Dtype d : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
    for (int64_t n : {1, 255, 1000001}) {
      CAPTURE(dtype_name(d), n);
      auto g = random_tensor(rng, n, d, -100.0, 100.0);
      DevBuf dG(g.buf), dFlag(std::vector<int32_t>{0}), dS(std::vector<float>{1024.f});
      check_overflow_cuda({dG.get(), n, d, dFlag.as<int32_t>()}, nullptr);
      CHECK(dFlag.to_vector<int32_t>()[0] == 0);
      unscale_cuda({dG.get(), n, d, dS.f(), dFlag.as<int32_t>()}, nullptr);
      Buffer want = g.buf;
      const float S = 1024.f;
      unscale_cpu({want.data(), n, d, &S, nullptr});
      CHECK(dG.to_buffer(n, d).raw() == want.raw());  // multiply by an exact 2^-10
      CHECK(dFlag.to_vector<int32_t>()[0] == 0);
      for (float bad : {inf, -inf, std::numeric_limits<float>::quiet_NaN()}) {
        Buffer b = g.buf;
        b.set(n - 1, bad);
        DevBuf dB(b), dF(std::vector<int32_t>{0});
        check_overflow_cuda({dB.get(), n, d, dF.as<int32_t>()}, nullptr);
        CHECK(dF.to_vector<int32_t>()[0] == 1);
      }
    }
  }
}

TEST_CASE("gpu update_scale walks the same state machine as the CPU", "[gpu][kernels][loss_scale]") {
  LossScaleState host;
  DevBuf dState(sizeof(LossScaleState));
  dState.upload(&host);
  LossScaleConfig cfg;
  cfg.growth_interval = 5;  // a short interval keeps the walk small; 2000 is tested on CPU
  Rng rng(123);
  for (int step = 0; step < 40; ++step) {
    const int32_t overflow = rng.uniform(0, 1) < 0.2 ? 1 : 0;
    host.found_inf = overflow;
    PARALAB_CUDA_CHECK(cudaMemcpy(static_cast<char*>(dState.get()) + offsetof(LossScaleState, found_inf),
                                  &overflow, sizeof(int32_t), cudaMemcpyHostToDevice));
    update_scale_cpu(&host, cfg);
    update_scale_cuda(static_cast<LossScaleState*>(dState.get()), cfg, nullptr);
    LossScaleState dev;
    dState.download(&dev);
    REQUIRE(dev.scale == host.scale);
    REQUIRE(dev.growth_tracker == host.growth_tracker);
    REQUIRE(dev.found_inf == 0);
    REQUIRE(dev.last_step_skipped == host.last_step_skipped);
    REQUIRE(dev.skipped_steps == host.skipped_steps);
  }
}

TEST_CASE("gpu l2norm_sq matches the CPU twin and is reproducible", "[gpu][kernels][l2norm]") {
  Rng rng(124);
  for (Dtype d : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
    for (int64_t n : {1, 4095, 1000003}) {
      CAPTURE(dtype_name(d), n);
      auto x = random_tensor(rng, n, d, -2.0, 2.0);
      float want = 0.f;
      l2norm_sq_cpu({x.buf.data(), n, d, &want, false});
      DevBuf dX(x.buf), dOut(std::vector<float>{3.f});
      l2norm_sq_cuda({dX.get(), n, d, dOut.f(), true}, nullptr);
      CHECK(dOut.to_vector<float>()[0] == Approx(want + 3.f).epsilon(1e-5));
      l2norm_sq_cuda({dX.get(), n, d, dOut.f(), false}, nullptr);
      const float first = dOut.to_vector<float>()[0];
      CHECK(first == Approx(want).epsilon(1e-5));
      l2norm_sq_cuda({dX.get(), n, d, dOut.f(), false}, nullptr);
      CHECK(dOut.to_vector<float>()[0] == first);  // fixed reduction order: bit-identical
    }
  }
}
