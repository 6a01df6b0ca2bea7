// tests/kernels/gpu_test_attention.cpp — [gpu] fused flash-style attention against the CPU
// reference: forward output and log-sum-exp, backward dq/dk/dv, for MHA and GQA, causal and
// not, head_dim not a multiple of 32, sequence lengths not multiples of the 32-row tiles.
#include <catch2/catch.hpp>

#include "gpu_test_util.hpp"
#include "kernels/attention.hpp"

using namespace paralab::kernels;
using namespace paralab::kernels::test;

namespace {
struct Dims { int64_t b, h, hkv, s, d; bool causal; };
const Dims kCases[] = {{1, 1, 1, 1, 1, true},      {2, 4, 4, 33, 64, true},  {1, 8, 2, 100, 128, true},
                       {2, 3, 1, 65, 80, false},   {1, 2, 2, 257, 256, true}, {1, 4, 4, 31, 16, false},
                       {1, 2, 1, 512, 64, true}};
}  // namespace

TEST_CASE("gpu flash attention forward/backward match the CPU reference", "[gpu][kernels][attention]") {
  Rng rng(130);
  for (Dtype dt : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
    for (const Dims& c : kCases) {
      CAPTURE(dtype_name(dt), c.b, c.h, c.hkv, c.s, c.d, c.causal);
      const int64_t nq = c.b * c.h * c.s * c.d, nk = c.b * c.hkv * c.s * c.d, nr = c.b * c.h * c.s;
      auto q = random_tensor(rng, nq, dt);
      auto k = random_tensor(rng, nk, dt);
      auto v = random_tensor(rng, nk, dt);
      auto dout = random_tensor(rng, nq, dt);
      Buffer out(nq, dt), dq(nq, dt), dk(nk, dt), dv(nk, dt);
      std::vector<float> lse(nr);
      attention_fwd_cpu({q.buf.data(), k.buf.data(), v.buf.data(), out.data(), lse.data(), c.b, c.h, c.hkv,
                         c.s, c.d, 0.f, c.causal, dt});
      attention_bwd_cpu({q.buf.data(), k.buf.data(), v.buf.data(), out.data(), dout.buf.data(), lse.data(),
                         dq.data(), dk.data(), dv.data(), c.b, c.h, c.hkv, c.s, c.d, 0.f, c.causal, dt});
      DevBuf dQ(q.buf), dK(k.buf), dV(v.buf), dDO(dout.buf), dOut(out.bytes()), dLse(static_cast<size_t>(nr) * 4);
      flash_attention_fwd_cuda({dQ.get(), dK.get(), dV.get(), dOut.get(), dLse.f(), c.b, c.h, c.hkv, c.s,
                                c.d, 0.f, c.causal, dt}, nullptr);
      CHECK(rel_err(dev_f32(dOut, nq, dt), out.f32()) <= gpu_tol(dt));
      CHECK(rel_err(dLse.to_vector<float>(), lse) <= 1e-5);
      // Backward from the CPU forward's out and lse: both backwards see identical inputs.
      DevBuf dOutC(out), dLseC(lse), dDQ(dq.bytes()), dDK(dk.bytes()), dDV(dv.bytes());
      flash_attention_bwd_cuda({dQ.get(), dK.get(), dV.get(), dOutC.get(), dDO.get(), dLseC.f(), dDQ.get(),
                                dDK.get(), dDV.get(), c.b, c.h, c.hkv, c.s, c.d, 0.f, c.causal, dt}, nullptr);
      CHECK(rel_err(dev_f32(dDQ, nq, dt), dq.f32()) <= gpu_tol(dt));
      CHECK(rel_err(dev_f32(dDK, nk, dt), dk.f32()) <= gpu_tol(dt));
      CHECK(rel_err(dev_f32(dDV, nk, dt), dv.f32()) <= gpu_tol(dt));
    }
  }
}

TEST_CASE("gpu attention rejects head_dim > 256", "[gpu][kernels][attention]") {
  CHECK_THROWS_AS(flash_attention_fwd_cuda({reinterpret_cast<void*>(16), reinterpret_cast<void*>(16),
                                            reinterpret_cast<void*>(16), reinterpret_cast<void*>(16),
                                            nullptr, 1, 1, 1, 4, 512, 0.f, true, Dtype::f32},
                                           nullptr),
                  KernelError);
}
