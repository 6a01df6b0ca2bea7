// tests/kernels/gpu_test_elementwise.cpp — [gpu] elementwise CUDA kernels against their CPU
// twins on random inputs: bias+GELU, SwiGLU, dropout and bias-dropout-add (masks must be
// bit-identical: same Philox stream), cast (bit-identical), RoPE. Sizes include 1, odd
// widths, non-multiples of the block sizes and more rows than gridDim.y (65535).
#include <catch2/catch.hpp>

#include "gpu_test_util.hpp"
#include "kernels/cast.hpp"
#include "kernels/dropout.hpp"
#include "kernels/gelu.hpp"
#include "kernels/rope.hpp"
#include "kernels/swiglu.hpp"

using namespace paralab::kernels;
using namespace paralab::kernels::test;

namespace {
const Dtype kDtypes[] = {Dtype::f32, Dtype::bf16, Dtype::f16};
struct RC { int64_t rows, cols; };
const RC kShapes[] = {{1, 1}, {3, 33}, {17, 1000}, {64, 4097}, {70001, 3}};
}  // namespace

TEST_CASE("gpu gelu forward/backward match the CPU twin", "[gpu][kernels][gelu]") {
  Rng rng(100);
  for (Dtype d : kDtypes) {
    for (RC s : kShapes) {
      for (bool bias : {false, true}) {
        CAPTURE(dtype_name(d), s.rows, s.cols, bias);
        const int64_t n = s.rows * s.cols;
        auto x = random_tensor(rng, n, d, -5.0, 5.0);
        auto b = random_tensor(rng, s.cols, d, -1.0, 1.0);
        auto dy = random_tensor(rng, n, d);
        Buffer y(n, d), dx(n, d);
        std::vector<float> db(s.cols, 0.5f);
        const void* bp = bias ? b.buf.data() : nullptr;
        gelu_fwd_cpu({x.buf.data(), bp, y.data(), s.rows, s.cols, d});
        gelu_bwd_cpu({dy.buf.data(), x.buf.data(), bp, dx.data(), db.data(), true, s.rows, s.cols, d});

        DevBuf dX(x.buf), dB(b.buf), dDY(dy.buf), dY(y.bytes()), dDX(dx.bytes());
        DevBuf dDB(std::vector<float>(s.cols, 0.5f));
        const void* dbp = bias ? dB.get() : nullptr;
        gelu_fwd_cuda({dX.get(), dbp, dY.get(), s.rows, s.cols, d}, nullptr);
        gelu_bwd_cuda({dDY.get(), dX.get(), dbp, dDX.get(), dDB.f(), true, s.rows, s.cols, d}, nullptr);
        CHECK(rel_err(dev_f32(dY, n, d), y.f32()) <= gpu_tol(d));
        CHECK(rel_err(dev_f32(dDX, n, d), dx.f32()) <= gpu_tol(d));
        CHECK(rel_err(dDB.to_vector<float>(), db) <= 1e-5);
      }
    }
  }
}

TEST_CASE("gpu swiglu forward/backward match the CPU twin", "[gpu][kernels][swiglu]") {
  Rng rng(101);
  for (Dtype d : kDtypes) {
    for (RC s : kShapes) {
      CAPTURE(dtype_name(d), s.rows, s.cols);
      const int64_t F = s.cols, n = s.rows * F;
      auto x = random_tensor(rng, 2 * n, d, -6.0, 6.0);
      auto dy = random_tensor(rng, n, d);
      Buffer y(n, d), dx(2 * n, d);
      swiglu_fwd_cpu({x.buf.data(), y.data(), s.rows, F, d});
      swiglu_bwd_cpu({dy.buf.data(), x.buf.data(), dx.data(), s.rows, F, d});
      DevBuf dX(x.buf), dDY(dy.buf), dY(y.bytes()), dDX(dx.bytes());
      swiglu_fwd_cuda({dX.get(), dY.get(), s.rows, F, d}, nullptr);
      swiglu_bwd_cuda({dDY.get(), dX.get(), dDX.get(), s.rows, F, d}, nullptr);
      CHECK(rel_err(dev_f32(dY, n, d), y.f32()) <= gpu_tol(d));
      CHECK(rel_err(dev_f32(dDX, 2 * n, d), dx.f32()) <= gpu_tol(d));
    }
  }
}

TEST_CASE("gpu dropout draws the CPU twin's mask bit for bit", "[gpu][kernels][dropout]") {
  Rng rng(102);
  for (Dtype d : kDtypes) {
    for (int64_t n : {1, 3, 4, 5, 1023, 100003}) {
      for (uint64_t offset : {0ull, 1ull, 3ull, 4098ull}) {
        CAPTURE(dtype_name(d), n, offset);
        const float p = 0.3f;
        auto x = random_tensor(rng, n, d, 0.5, 2.0);
        auto dy = random_tensor(rng, n, d);
        Buffer y(n, d), dx(n, d);
        std::vector<uint8_t> mask(n);
        dropout_fwd_cpu({x.buf.data(), y.data(), mask.data(), n, p, 2024, offset, d});
        dropout_bwd_cpu({dy.buf.data(), mask.data(), dx.data(), n, p, d});
        DevBuf dX(x.buf), dDY(dy.buf), dY(y.bytes()), dM(static_cast<size_t>(n)), dDX(dx.bytes());
        dropout_fwd_cuda({dX.get(), dY.get(), dM.as<uint8_t>(), n, p, 2024, offset, d}, nullptr);
        dropout_bwd_cuda({dDY.get(), dM.as<uint8_t>(), dDX.get(), n, p, d}, nullptr);
        CHECK(dM.to_vector<uint8_t>() == mask);
        CHECK(dY.to_buffer(n, d).raw() == y.raw());   // x * s or 0: same fp32 product
        CHECK(dDX.to_buffer(n, d).raw() == dx.raw());
      }
    }
  }
}

TEST_CASE("gpu bias-dropout-add matches the CPU twin", "[gpu][kernels][dropout]") {
  Rng rng(103);
  for (Dtype d : kDtypes) {
    for (RC s : kShapes) {
      for (float p : {0.f, 0.1f}) {
        CAPTURE(dtype_name(d), s.rows, s.cols, p);
        const int64_t n = s.rows * s.cols;
        auto x = random_tensor(rng, n, d);
        auto b = random_tensor(rng, s.cols, d, -0.5, 0.5);
        auto r = random_tensor(rng, n, d);
        auto dout = random_tensor(rng, n, d);
        Buffer out(n, d), dx(n, d);
        std::vector<uint8_t> mask(n);
        std::vector<float> db(s.cols);
        dropout_add_fwd_cpu({x.buf.data(), b.buf.data(), r.buf.data(), out.data(), mask.data(),
                             s.rows, s.cols, p, 7, 123, d});
        dropout_add_bwd_cpu({dout.buf.data(), mask.data(), dx.data(), db.data(), false, s.rows, s.cols, p, d});
        DevBuf dX(x.buf), dB(b.buf), dR(r.buf), dO(out.bytes()), dM(static_cast<size_t>(n)), dDO(dout.buf),
            dDX(dx.bytes()), dDB(static_cast<size_t>(s.cols) * 4);
        dropout_add_fwd_cuda({dX.get(), dB.get(), dR.get(), dO.get(), dM.as<uint8_t>(), s.rows,
                              s.cols, p, 7, 123, d}, nullptr);
        dropout_add_bwd_cuda({dDO.get(), dM.as<uint8_t>(), dDX.get(), dDB.f(), false, s.rows, s.cols, p, d},
                             nullptr);
        CHECK(dM.to_vector<uint8_t>() == mask);
        CHECK(rel_err(dev_f32(dO, n, d), out.f32()) <= gpu_tol(d));
        CHECK(rel_err(dev_f32(dDX, n, d), dx.f32()) <= gpu_tol(d));
        CHECK(rel_err(dDB.to_vector<float>(), db) <= 1e-5);
      }
    }
  }
}

TEST_CASE("gpu cast is bit-identical to the CPU twin for every dtype pair", "[gpu][kernels][cast]") {
  const Dtype all[] = {Dtype::f32, Dtype::bf16, Dtype::f16, Dtype::f8e4m3, Dtype::f8e5m2};
  Rng rng(104);
  for (int64_t n : {1, 2049, 100001}) {
    // Values spanning fp8 and f16 ranges, including overflow and subnormals (no NaN: NaN
    // payloads may legitimately differ between hardware and software conversion).
    std::vector<float> v(n);
    for (auto& x : v) x = std::ldexp(float(rng.uniform(-1.0, 1.0)), int(rng.integer(-28, 20)));
    for (Dtype sd : all) {
      const Buffer src(v, sd);
      DevBuf dS(src);
      for (Dtype dd : all) {
        CAPTURE(n, dtype_name(sd), dtype_name(dd));
        Buffer want(n, dd);
        cast_cpu({src.data(), sd, want.data(), dd, n});
        DevBuf dD(want.bytes());
        cast_cuda({dS.get(), sd, dD.get(), dd, n}, nullptr);
        CHECK(dD.to_buffer(n, dd).raw() == want.raw());
      }
    }
  }
}

TEST_CASE("gpu rope forward/backward match the CPU twin", "[gpu][kernels][rope]") {
  Rng rng(105);
  struct Case { int64_t rows, heads, hd, rot, batch, pos0; };
  const Case cases[] = {{1, 1, 2, 0, 1, 0}, {7, 3, 64, 0, 2, 0}, {33, 5, 80, 32, 1, 4000},
                        {130, 8, 128, 0, 4, 8000}, {5, 2, 256, 0, 1, 3}};
  for (Dtype d : kDtypes) {
    for (const Case& c : cases) {
      CAPTURE(dtype_name(d), c.rows, c.heads, c.hd, c.rot);
      const int64_t n = c.rows * c.heads * c.hd;
      auto x = random_tensor(rng, n, d);
      Buffer y(n, d), xb(n, d);
      rope_fwd_cpu({x.buf.data(), y.data(), c.rows, c.heads, c.hd, c.rot, c.batch, c.pos0, 10000.0, d});
      rope_bwd_cpu({x.buf.data(), xb.data(), c.rows, c.heads, c.hd, c.rot, c.batch, c.pos0, 10000.0, d});
      DevBuf dX(x.buf), dY(y.bytes()), dXB(xb.bytes());
      rope_fwd_cuda({dX.get(), dY.get(), c.rows, c.heads, c.hd, c.rot, c.batch, c.pos0, 10000.0, d}, nullptr);
      rope_bwd_cuda({dX.get(), dXB.get(), c.rows, c.heads, c.hd, c.rot, c.batch, c.pos0, 10000.0, d}, nullptr);
      CHECK(rel_err(dev_f32(dY, n, d), y.f32()) <= gpu_tol(d));
      CHECK(rel_err(dev_f32(dXB, n, d), xb.f32()) <= gpu_tol(d));
      // In place on the device.
      DevBuf dIn(x.buf);
      rope_fwd_cuda({dIn.get(), dIn.get(), c.rows, c.heads, c.hd, c.rot, c.batch, c.pos0, 10000.0, d}, nullptr);
      CHECK(rel_err(dev_f32(dIn, n, d), y.f32()) <= gpu_tol(d));
    }
  }
}
