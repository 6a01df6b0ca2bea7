// tests/exec/cuda — [gpu] tests of the CUDA backend's device kernels against host formulas
// (exit 77 without a device): strided copies with conversion and accumulation, FP8 amax and
// e4m3 quantization on every path of fp8_quantize.cu (bit for bit against the host twin), head
// packing, fills, cross-entropy stages, learned positions, and the parameter values of every
// split. Whole steps against the CPU backend are in gpu_test_backend.cpp.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../exec_test_util.hpp"
#include "exec/cuda/device_ops.hpp"
#include "exec/fill.hpp"
#include "kernels/dtype.hpp"

using namespace paralab;
using namespace paralab::exec;
using namespace paralab::exec::test;
namespace dev = paralab::exec::cuda::dev;

namespace {

template <class T>
struct DevBuf {
  explicit DevBuf(size_t count) : n(count) { REQUIRE(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)) == cudaSuccess); }
  DevBuf(const DevBuf&) = delete;
  ~DevBuf() { cudaFree(p); }
  void up(const std::vector<T>& v) { REQUIRE(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess); }
  std::vector<T> down() const {
    std::vector<T> v(n);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    REQUIRE(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return v;
  }
  T* p = nullptr;
  size_t n;
};

}  // namespace

TEST_CASE("device copies: strided rows, dtype conversion with one rounding, accumulation", "[gpu][exec][cuda]") {
  const int64_t rows = 37, cols = 19, sld = 23, dld = 29;
  const auto src = random_floats(static_cast<size_t>(rows * sld), 1);
  const auto dst0 = random_floats(static_cast<size_t>(rows * dld), 2);
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (bool acc : {false, true}) {
      CAPTURE(int(t), acc);
      const auto s = storage(src, DType::f32);
      const auto d = storage(dst0, t);
      DevBuf<uint8_t> S(s.size()), D(d.size());
      S.up(s);
      D.up(d);
      dev::copy2d(S.p, dev::T::f32, sld, D.p, static_cast<dev::T>(static_cast<int>(t)), dld, rows, cols, acc, nullptr);
      const auto got = values(D.down(), t);
      const auto before = values(d, t);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < dld; ++c) {
          const size_t o = static_cast<size_t>(r * dld + c);
          float want = before[o];
          if (c < cols) {
            const float v = src[static_cast<size_t>(r * sld + c)];
            std::vector<float> one{acc ? before[o] + v : v};
            want = values(storage(one, t), t)[0];
          }
          REQUIRE(got[o] == want);
        }
    }
}

TEST_CASE("device FP8 quantization: amax and the e4m3 copies, plain and transposed, equal the host's bit for bit",
          "[gpu][exec][cuda]") {
  // The host twin: amax over the stored values, scale = 448 / amax in float, each element
  // rounded by kernels/dtype.hpp's OFP8 encoder, [cols, rows] when transposed, and the
  // dequantization scale 1 / scale. Rows strided where ld > cols (a view inside a wider tensor).
  // Shapes that take each path of exec/cuda/fp8_quantize.cu: scalar (widths not multiples of 8,
  // a view 2 elements in, so rows start unaligned), vector contiguous and strided, transposed
  // tiles whole (64 x 64) and cut at both edges, and a transposed copy of rows % 8 != 0.
  struct Shape {
    int64_t rows, cols, ld, offset;
  };
  const Shape shapes[] = {{45, 37, 41, 0}, {64, 128, 128, 0}, {72, 200, 208, 0}, {136, 72, 72, 0},
                          {8, 8, 8, 0},   {40, 64, 64, 2},   {44, 96, 96, 0}};
  uint64_t seed = 7;
  for (const Shape& sh : shapes)
    for (DType t : {DType::f32, DType::bf16, DType::f16})
      for (bool transpose : {false, true}) {
        const int64_t rows = sh.rows, cols = sh.cols, ld = sh.ld;
        CAPTURE(rows, cols, ld, sh.offset, int(t), transpose);
        // A spread of magnitudes (e4m3's normals and subnormals after scaling), never zeros.
        auto src = random_floats(static_cast<size_t>(rows * ld + sh.offset), ++seed, 3.0f);
        for (size_t i = 0; i < src.size(); i += 5) src[i] *= 1e-3f;
        const auto s = storage(src, t);
        const auto stored = values(s, t);
        const int64_t off = sh.offset;
        float amax = 0;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::abs(stored[static_cast<size_t>(off + r * ld + c)]));
        const float scale = 448.0f / amax;
        DevBuf<uint8_t> X(s.size()), Q(static_cast<size_t>(rows * cols));
        DevBuf<float> sc(2);
        X.up(s);
        sc.up({0.f, 0.f});
        const auto dt = static_cast<dev::T>(static_cast<int>(t));
        const uint8_t* x = X.p + off * bytes_of(t);
        dev::amax(x, dt, rows, cols, ld, sc.p, nullptr);
        dev::quantize_e4m3(x, dt, rows, cols, ld, transpose, sc.p, Q.p, sc.p + 1, nullptr);
        const auto scalars = sc.down();
        CHECK(scalars[0] == amax);
        CHECK(scalars[1] == 1.0f / scale);
        const auto q = Q.down();
        int64_t wrong = 0;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) {
            const uint8_t want = kernels::f32_to_e4m3_bits(stored[static_cast<size_t>(off + r * ld + c)] * scale);
            wrong += q[static_cast<size_t>(transpose ? c * rows + r : r * cols + c)] != want;
          }
        CHECK(wrong == 0);
      }
}

TEST_CASE("device head packing matches the qkv row layout, both ways", "[gpu][exec][cuda]") {
  const int64_t B = 2, H = 3, S = 5, D = 4, ld = 40, col0 = 7;
  const auto src = random_floats(static_cast<size_t>(S * B * ld), 3);
  DevBuf<float> in(src.size()), packed(static_cast<size_t>(B * H * S * D)), back(src.size());
  in.up(src);
  dev::pack_heads(in.p, dev::T::f32, ld, col0, D, packed.p, dev::T::f32, B, H, S, D, nullptr);
  const auto p = packed.down();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < S; ++i)
        for (int64_t c = 0; c < D; ++c)
          REQUIRE(p[static_cast<size_t>(((b * H + h) * S + i) * D + c)] ==
                  src[static_cast<size_t>((i * B + b) * ld + col0 + h * D + c)]);
  back.up(std::vector<float>(src.size(), 0.0f));
  dev::unpack_heads(packed.p, dev::T::f32, back.p, dev::T::f32, ld, col0, D, B, H, S, D, false, nullptr);
  const auto u = back.down();
  for (int64_t r = 0; r < S * B; ++r)
    for (int64_t c = col0; c < col0 + H * D; ++c) REQUIRE(u[static_cast<size_t>(r * ld + c)] == src[static_cast<size_t>(r * ld + c)]);
}

TEST_CASE("device fills equal the CPU backend's", "[gpu][exec][cuda]") {
  const int64_t n = 100003;
  DevBuf<float> w(static_cast<size_t>(n));
  dev::fill(w.p, dev::T::f32, n, 0, 77, 1000, 0, nullptr);
  const auto got = w.down();
  for (int64_t i = 0; i < n; ++i) REQUIRE(got[static_cast<size_t>(i)] == fill_value(Fill::weights, 77, 1000 + i));
  DevBuf<int32_t> ids(static_cast<size_t>(n));
  dev::fill(ids.p, dev::T::i32, n, 4, 5, 0, 50304, nullptr);
  const auto id = ids.down();
  for (int64_t i = 0; i < n; ++i) REQUIRE(id[static_cast<size_t>(i)] == token_id(5, i, 50304));
}

TEST_CASE("device cross-entropy stages and learned positions match host formulas", "[gpu][exec][cuda]") {
  const int64_t T = 7, V = 1000, vstart = 500, h = 6, b = 1;
  const auto logits = random_floats(static_cast<size_t>(T * V), 9, 3.0f);
  std::vector<float> mx(static_cast<size_t>(T), -INFINITY);
  for (int64_t r = 0; r < T; ++r)
    for (int64_t v = 0; v < V; ++v) mx[static_cast<size_t>(r)] = std::max(mx[static_cast<size_t>(r)], logits[static_cast<size_t>(r * V + v)]);
  std::vector<int32_t> labels{500, 999, 1200, 10, 700, 501, 1499};
  DevBuf<float> L(logits.size()), M(mx.size()), EX(logits.size()), SUMS(static_cast<size_t>(2 * T)), DL(logits.size());
  DevBuf<int32_t> LAB(labels.size());
  L.up(logits);
  M.up(mx);
  LAB.up(labels);
  dev::xent_sum(L.p, dev::T::f32, M.p, LAB.p, vstart, EX.p, SUMS.p, T, V, nullptr);
  const auto sums = SUMS.down();
  for (int64_t r = 0; r < T; ++r) {
    double s = 0;
    for (int64_t v = 0; v < V; ++v) s += std::exp(double(logits[static_cast<size_t>(r * V + v)]) - mx[static_cast<size_t>(r)]);
    CHECK(std::abs(sums[static_cast<size_t>(2 * r)] - s) / s < 1e-5);
    const int64_t local = labels[static_cast<size_t>(r)] - vstart;
    CHECK(sums[static_cast<size_t>(2 * r + 1)] == (local >= 0 && local < V ? logits[static_cast<size_t>(r * V + local)] : 0.0f));
  }
  dev::xent_bwd(EX.p, SUMS.p, LAB.p, vstart, 0.5f, nullptr, DL.p, dev::T::f32, T, V, nullptr);
  const auto d = DL.down();
  const auto ex = EX.down();
  for (int64_t r = 0; r < T; ++r)
    for (int64_t v = 0; v < V; v += 37) {
      double want = ex[static_cast<size_t>(r * V + v)] / sums[static_cast<size_t>(2 * r)];
      if (labels[static_cast<size_t>(r)] - vstart == v) want -= 1;
      CHECK(std::abs(d[static_cast<size_t>(r * V + v)] - 0.5 * want) < 1e-6);
    }
  // Positions: out[r] += pos[r / b + pos0]; gradient sums rows of a position.
  const int64_t pos0 = 2;
  const auto out0 = random_floats(static_cast<size_t>(T * h), 10), pos = random_floats(static_cast<size_t>((T + pos0) * h), 11);
  DevBuf<float> O(out0.size()), P(pos.size());
  O.up(out0);
  P.up(pos);
  dev::add_positions(O.p, dev::T::f32, P.p, dev::T::f32, T, h, b, pos0, nullptr);
  const auto o = O.down();
  for (int64_t r = 0; r < T; ++r)
    for (int64_t c = 0; c < h; ++c)
      REQUIRE(o[static_cast<size_t>(r * h + c)] == out0[static_cast<size_t>(r * h + c)] + pos[static_cast<size_t>((r + pos0) * h + c)]);
}

TEST_CASE("device parameter values equal exec/fill.hpp's for every split, in fp32 and bf16", "[gpu][exec][cuda]") {
  for (int split = 0; split <= 4; ++split) {
    ParamRegion r;
    r.rows = 300;
    r.split = static_cast<ParamSplit>(split);
    r.gain = split == 0;
    r.key = 4242 + static_cast<uint64_t>(split);
    r.tp = 1, r.tp_size = 2, r.heads = 4, r.groups = 2, r.head_dim = 8, r.ffn = 40;
    r.cols = split == 3 ? (4 + 2 * 2) * 8 : split == 4 ? 80 : 57;
    paralab::exec::fillmath::ParamGeo g;
    g.rows = r.rows, g.cols = r.cols, g.tp = r.tp, g.tp_size = r.tp_size, g.heads = r.heads, g.groups = r.groups;
    g.head_dim = r.head_dim, g.ffn = r.ffn, g.key = r.key, g.split = split, g.gain = r.gain ? 1 : 0;
    const int64_t local0 = 17, n = r.rows * r.cols - local0;
    DevBuf<float> w(static_cast<size_t>(n));
    dev::fill_params(w.p, dev::T::f32, n, g, local0, nullptr);
    DevBuf<uint16_t> h(static_cast<size_t>(n));
    dev::fill_params(h.p, dev::T::bf16, n, g, local0, nullptr);
    const auto got = w.down();
    const auto got16 = h.down();
    CAPTURE(split);
    for (int64_t i = 0; i < n; ++i) {
      const float want = param_value(r, (local0 + i) / r.cols, (local0 + i) % r.cols);
      REQUIRE(got[static_cast<size_t>(i)] == want);
      REQUIRE(got16[static_cast<size_t>(i)] == kernels::f32_to_bf16_bits(want));
    }
  }
}
