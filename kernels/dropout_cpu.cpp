// kernels/dropout_cpu.cpp — CPU twin of dropout and bias-dropout-add (semantics:
// dropout.hpp, random stream: rng.hpp). The stream is consumed one Philox block (4 words)
// at a time, so each element costs a quarter of a Philox call, as on the GPU.
#include <algorithm>
#include <vector>

#include "kernels/cpu_util.hpp"
#include "kernels/dropout.hpp"
#include "kernels/rng.hpp"

namespace paralab::kernels {
namespace {

// Writes keep[i] (1 = kept) for stream positions offset .. offset+n-1.
void draw_mask(uint64_t seed, uint64_t offset, int64_t n, uint64_t threshold, uint8_t* keep) {
  int64_t i = 0;
  while (i < n) {
    const uint64_t g = offset + uint64_t(i);
    const Philox4 b = dropout_block(seed, g >> 2);
    for (uint32_t w = uint32_t(g & 3u); w < 4u && i < n; ++w, ++i)
      keep[i] = uint64_t(b.v[w]) >= threshold ? 1 : 0;
  }
}

void check_p(const char* k, float p) {
  if (!(p >= 0.f && p <= 1.f))
    detail::fail_arg(k, "p", std::to_string(p), "drop probability must be in [0, 1]");
}

}  // namespace

void dropout_fwd_check(const DropoutFwdArgs& a) {
  const char* k = "dropout_fwd";
  detail::check_positive(k, "n", a.n);
  detail::check_float_dtype(k, "dtype", a.dtype);
  check_p(k, a.p);
  detail::check_ptr(k, "x", a.x);
  detail::check_ptr(k, "y", a.y);
}

void dropout_bwd_check(const DropoutBwdArgs& a) {
  const char* k = "dropout_bwd";
  detail::check_positive(k, "n", a.n);
  detail::check_float_dtype(k, "dtype", a.dtype);
  check_p(k, a.p);
  detail::check_ptr(k, "dy", a.dy);
  detail::check_ptr(k, "mask", a.mask, a.p > 0.f);
  detail::check_ptr(k, "dx", a.dx);
}

void dropout_add_fwd_check(const DropoutAddFwdArgs& a) {
  const char* k = "dropout_add_fwd";
  detail::check_positive(k, "rows", a.rows);
  detail::check_positive(k, "cols", a.cols);
  detail::check_float_dtype(k, "dtype", a.dtype);
  check_p(k, a.p);
  detail::check_ptr(k, "x", a.x);
  detail::check_ptr(k, "residual", a.residual);
  detail::check_ptr(k, "out", a.out);
}

void dropout_add_bwd_check(const DropoutAddBwdArgs& a) {
  const char* k = "dropout_add_bwd";
  detail::check_positive(k, "rows", a.rows);
  detail::check_positive(k, "cols", a.cols);
  detail::check_float_dtype(k, "dtype", a.dtype);
  check_p(k, a.p);
  detail::check_ptr(k, "dout", a.dout);
  detail::check_ptr(k, "mask", a.mask, a.p > 0.f);
  detail::check_ptr(k, "dx", a.dx);
}

void dropout_fwd_cpu(const DropoutFwdArgs& a) {
  dropout_fwd_check(a);
  const uint64_t thr = dropout_threshold(a.p);
  const float s = dropout_scale(a.p);
  cpu::dispatch_float(a.dtype, "dropout_fwd", "dtype", [&](auto tag) {
    using T = decltype(tag);
    const T* x = cpu::as<T>(a.x);
    T* y = cpu::as<T>(a.y);
    constexpr int64_t kChunk = 4096;  // bounded scratch, any n
    uint8_t keep[kChunk];
    for (int64_t i0 = 0; i0 < a.n; i0 += kChunk) {
      const int64_t m = std::min(kChunk, a.n - i0);
      draw_mask(a.seed, a.offset + uint64_t(i0), m, thr, keep);
      for (int64_t i = 0; i < m; ++i)
        y[i0 + i] = from_f32<T>(keep[i] ? to_f32(x[i0 + i]) * s : 0.f);
      if (a.mask)
        for (int64_t i = 0; i < m; ++i) a.mask[i0 + i] = keep[i];
    }
  });
}

void dropout_bwd_cpu(const DropoutBwdArgs& a) {
  dropout_bwd_check(a);
  const float s = dropout_scale(a.p);
  cpu::dispatch_float(a.dtype, "dropout_bwd", "dtype", [&](auto tag) {
    using T = decltype(tag);
    const T* dy = cpu::as<T>(a.dy);
    T* dx = cpu::as<T>(a.dx);
    for (int64_t i = 0; i < a.n; ++i) {
      const bool keep = a.mask == nullptr || a.mask[i] != 0;
      dx[i] = from_f32<T>(keep ? to_f32(dy[i]) * s : 0.f);
    }
  });
}

void dropout_add_fwd_cpu(const DropoutAddFwdArgs& a) {
  dropout_add_fwd_check(a);
  const uint64_t thr = dropout_threshold(a.p);
  const float s = dropout_scale(a.p);
  cpu::dispatch_float(a.dtype, "dropout_add_fwd", "dtype", [&](auto tag) {
    using T = decltype(tag);
    const int64_t C = a.cols;
    std::vector<float> bias(C, 0.f);
    std::vector<uint8_t> keep(C);
    if (a.bias) cpu::load_row(cpu::as<T>(a.bias), C, bias.data());
    const T* x = cpu::as<T>(a.x);
    const T* res = cpu::as<T>(a.residual);
    T* out = cpu::as<T>(a.out);
    for (int64_t r = 0; r < a.rows; ++r) {
      const int64_t base = r * C;
      draw_mask(a.seed, a.offset + uint64_t(base), C, thr, keep.data());
      for (int64_t c = 0; c < C; ++c) {
        const float v = keep[c] ? (to_f32(x[base + c]) + bias[c]) * s : 0.f;
        out[base + c] = from_f32<T>(to_f32(res[base + c]) + v);
      }
      if (a.mask)
        for (int64_t c = 0; c < C; ++c) a.mask[base + c] = keep[c];
    }
  });
}

void dropout_add_bwd_cpu(const DropoutAddBwdArgs& a) {
  dropout_add_bwd_check(a);
  const float s = dropout_scale(a.p);
  cpu::dispatch_float(a.dtype, "dropout_add_bwd", "dtype", [&](auto tag) {
    using T = decltype(tag);
    const int64_t C = a.cols;
    std::vector<float> db(C, 0.f);
    const T* dout = cpu::as<T>(a.dout);
    T* dx = cpu::as<T>(a.dx);
    for (int64_t r = 0; r < a.rows; ++r) {
      const int64_t base = r * C;
      for (int64_t c = 0; c < C; ++c) {
        const bool keep = a.mask == nullptr || a.mask[base + c] != 0;
        const float v = keep ? to_f32(dout[base + c]) * s : 0.f;
        db[c] += v;
        dx[base + c] = from_f32<T>(v);
      }
    }
    if (a.dbias)
      for (int64_t c = 0; c < C; ++c) a.dbias[c] = a.accumulate ? a.dbias[c] + db[c] : db[c];
  });
}

}  // namespace paralab::kernels
