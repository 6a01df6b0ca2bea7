// tests/kernels/test_errors.cpp — argument validation: every kernel rejects null buffers,
// non-positive sizes and unsupported dtypes with a KernelError naming the kernel, the
// argument and the bad value (kernels/common.hpp).
#include <catch2/catch.hpp>

#include <string>

#include "kernels/adamw.hpp"
#include "kernels/attention.hpp"
#include "kernels/cast.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/dropout.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gelu.hpp"
#include "kernels/l2norm.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/loss_scale.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/sgd.hpp"
#include "kernels/softmax.hpp"
#include "kernels/swiglu.hpp"

using namespace paralab::kernels;

namespace {

// Runs f, expects a KernelError whose message contains every fragment.
template <class F>
void expect_error(F&& f, std::initializer_list<const char*> fragments) {
  try {
    f();
    FAIL("no KernelError thrown");
  } catch (const KernelError& e) {
    const std::string msg = e.what();
    for (const char* frag : fragments) {
      INFO("message: " << msg << " / expected fragment: " << frag);
      CHECK(msg.find(frag) != std::string::npos);
    }
  }
}

float buf[64];
const Dtype kBad = static_cast<Dtype>(42);

}  // namespace

TEST_CASE("KernelError is a std::runtime_error", "[kernels][errors]") {
  CHECK_THROWS_AS(layernorm_fwd_cpu({}), std::runtime_error);
}

TEST_CASE("kernels name the kernel, argument and value of a bad call", "[kernels][errors]") {
  expect_error([] { layernorm_fwd_cpu({buf, buf, nullptr, buf, nullptr, nullptr, 0, 4, 1e-5f, Dtype::f32}); },
               {"layernorm_fwd", "'rows'", "= 0", "> 0"});
  expect_error([] { layernorm_fwd_cpu({buf, nullptr, nullptr, buf, nullptr, nullptr, 2, 4, 1e-5f, Dtype::f32}); },
               {"layernorm_fwd", "'gamma'", "null"});
  expect_error([] { layernorm_fwd_cpu({buf, buf, nullptr, buf, nullptr, nullptr, 2, 4, 0.f, Dtype::f32}); },
               {"layernorm_fwd", "'eps'"});
  expect_error([] { layernorm_bwd_cpu({buf, buf, buf, buf, nullptr, buf, nullptr, nullptr, false, 2, 4, Dtype::f32}); },
               {"layernorm_bwd", "'rstd'"});
  expect_error([] { rmsnorm_fwd_cpu({buf, buf, buf, nullptr, 2, -3, 1e-5f, Dtype::f32}); },
               {"rmsnorm_fwd", "'cols'", "-3"});
  expect_error([] { rmsnorm_fwd_cpu({buf, buf, buf, nullptr, 2, 3, 1e-5f, kBad}); },
               {"rmsnorm_fwd", "'dtype'", "42", "unsupported dtype"});
  expect_error([] { rmsnorm_fwd_cpu({buf, buf, buf, nullptr, 2, 3, 1e-5f, Dtype::f8e4m3}); },
               {"rmsnorm_fwd", "f8e4m3"});
  expect_error([] { gelu_fwd_cpu({nullptr, nullptr, buf, 2, 2, Dtype::f32}); }, {"gelu_fwd", "'x'"});
  expect_error([] { gelu_bwd_cpu({buf, buf, nullptr, nullptr, nullptr, false, 2, 2, Dtype::bf16}); },
               {"gelu_bwd", "'dx'"});
  expect_error([] { swiglu_fwd_cpu({buf, buf, 2, 0, Dtype::f32}); }, {"swiglu_fwd", "'f'"});
  expect_error([] { swiglu_bwd_cpu({buf, buf, buf, 2, 2, Dtype::f8e5m2}); }, {"swiglu_bwd", "dtype"});
  expect_error([] { scaled_masked_softmax_fwd_cpu({buf, buf, nullptr, 4, 2, 2, 3, 1.f, true, Dtype::f32}); },
               {"scaled_masked_softmax_fwd", "'heads'", "3", "divide"});
  expect_error([] { scaled_masked_softmax_bwd_cpu({buf, nullptr, buf, 1, 2, 2, 1.f, Dtype::f32}); },
               {"scaled_masked_softmax_bwd", "'y'"});
  expect_error([] { dropout_fwd_cpu({buf, buf, nullptr, 4, 1.5f, 0, 0, Dtype::f32}); },
               {"dropout_fwd", "'p'", "1.5"});
  expect_error([] { dropout_bwd_cpu({buf, nullptr, buf, 4, 0.5f, Dtype::f32}); },
               {"dropout_bwd", "'mask'"});
  expect_error([] { dropout_add_fwd_cpu({buf, nullptr, nullptr, buf, nullptr, 2, 2, 0.1f, 0, 0, Dtype::f32}); },
               {"dropout_add_fwd", "'residual'"});
  expect_error([] { dropout_add_bwd_cpu({buf, nullptr, buf, nullptr, false, 0, 2, 0.f, Dtype::f32}); },
               {"dropout_add_bwd", "'rows'"});
  expect_error([] { rope_fwd_cpu({buf, buf, 2, 2, 8, 3, 1, 0, 10000.0, Dtype::f32}); },
               {"rope_fwd", "'rotary_dim'", "3"});
  expect_error([] { rope_bwd_cpu({buf, buf, 2, 2, 8, 0, 0, 0, 10000.0, Dtype::f32}); },
               {"rope_bwd", "'batch'"});
  int32_t ids[2] = {0, 1};
  expect_error([&] { embedding_fwd_cpu({ids, buf, buf, 2, 4, 5, 5, Dtype::f32}); },
               {"embedding_fwd", "'vocab_end'", "5"});
  expect_error([&] { embedding_bwd_cpu({ids, buf, nullptr, false, 2, 4, 0, 5, Dtype::f32}); },
               {"embedding_bwd", "'dtable'"});
  expect_error([&] { ce_local_max_cpu({buf, buf, 2, 0, Dtype::f32}); }, {"ce_local_max", "'vocab'"});
  expect_error([&] { ce_local_sumexp_cpu({buf, ids, buf, buf, nullptr, 2, 2, 0, Dtype::f32}); },
               {"ce_local_sumexp", "'target_logit'"});
  expect_error([&] { ce_loss_cpu({buf, buf, buf, nullptr, nullptr, 2}); }, {"ce_loss", "'loss'"});
  expect_error([&] { ce_bwd_cpu({buf, ids, buf, buf, nullptr, 1.f, buf, 2, 2, -1, Dtype::f32}); },
               {"ce_bwd", "'vocab_start'", "-1"});
  expect_error([] {
    AdamWArgs a;
    a.master = buf; a.exp_avg = buf; a.exp_avg_sq = buf; a.grad = buf; a.n = 4; a.step = 0;
    adamw_step_cpu(a);
  }, {"adamw_step", "'step'", "0"});
  expect_error([] {
    AdamWArgs a;
    a.master = buf; a.exp_avg = nullptr; a.exp_avg_sq = buf; a.grad = buf; a.n = 4;
    adamw_step_cpu(a);
  }, {"adamw_step", "'exp_avg'"});
  expect_error([] {
    SgdArgs a;
    a.master = buf; a.grad = buf; a.n = 4; a.momentum = 0.9f;
    sgd_step_cpu(a);
  }, {"sgd_step", "'momentum_buf'"});
  expect_error([] { cast_cpu({buf, Dtype::f32, buf, kBad, 4}); }, {"cast", "'dst_dtype'", "42"});
  expect_error([] { cast_cpu({buf, Dtype::f32, buf, Dtype::bf16, -1}); }, {"cast", "'n'", "-1"});
  expect_error([] { check_overflow_cpu({buf, 4, Dtype::f32, nullptr}); }, {"check_overflow", "'found_inf'"});
  expect_error([] { unscale_cpu({buf, 4, Dtype::f32, nullptr, nullptr}); }, {"unscale", "'scale'"});
  expect_error([] { update_scale_cpu(nullptr); }, {"update_scale", "'state'"});
  expect_error([] {
    LossScaleState s;
    LossScaleConfig c;
    c.backoff_factor = 2.f;
    update_scale_cpu(&s, c);
  }, {"update_scale", "'backoff_factor'"});
  expect_error([] { l2norm_sq_cpu({buf, 0, Dtype::f32, buf, false}); }, {"l2norm_sq", "'n'"});
  expect_error([] { attention_fwd_cpu({buf, buf, buf, buf, nullptr, 1, 4, 3, 2, 2, 0.f, true, Dtype::f32}); },
               {"attention_fwd", "'kv_heads'", "3"});
  expect_error([] { attention_bwd_cpu({buf, buf, buf, buf, buf, buf, buf, buf, nullptr, 1, 2, 2, 2, 2, 0.f, true, Dtype::f32}); },
               {"attention_bwd", "'dv'"});
}
