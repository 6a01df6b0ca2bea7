// kernels/attention_cpu.cpp — CPU reference attention forward/backward (formulas and shapes:
// attention.hpp). Per (batch, kv head): K and V are widened to fp32 once and shared by the
// q heads of the group; per query row the scores are computed with contiguous dot products
// and the output with contiguous axpys (vectorizable). dK/dV are accumulated in fp32 over
// the group's q heads, then rounded once.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/cpu_util.hpp"

namespace paralab::kernels {
namespace {

void check_dims(const char* k, int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq,
                int64_t head_dim, float scale, Dtype d) {
  detail::check_positive(k, "batch", batch);
  detail::check_positive(k, "heads", heads);
  detail::check_positive(k, "kv_heads", kv_heads);
  detail::check_positive(k, "seq", seq);
  detail::check_positive(k, "head_dim", head_dim);
  if (heads % kv_heads != 0)
    detail::fail_arg(k, "kv_heads", std::to_string(kv_heads), "must divide heads");
  detail::check_finite(k, "scale", scale);
  detail::check_float_dtype(k, "dtype", d);
}

inline void axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace

float attention_scale(float scale, int64_t head_dim) {
  return scale != 0.f ? scale : float(1.0 / std::sqrt(double(head_dim)));
}

void attention_fwd_check(const AttentionFwdArgs& a) {
  const char* k = "attention_fwd";
  check_dims(k, a.batch, a.heads, a.kv_heads, a.seq, a.head_dim, a.scale, a.dtype);
  detail::check_ptr(k, "q", a.q);
  detail::check_ptr(k, "k", a.k);
  detail::check_ptr(k, "v", a.v);
  detail::check_ptr(k, "out", a.out);
}

void attention_bwd_check(const AttentionBwdArgs& a) {
  const char* k = "attention_bwd";
  check_dims(k, a.batch, a.heads, a.kv_heads, a.seq, a.head_dim, a.scale, a.dtype);
  detail::check_ptr(k, "q", a.q);
  detail::check_ptr(k, "k", a.k);
  detail::check_ptr(k, "v", a.v);
  detail::check_ptr(k, "out", a.out);
  detail::check_ptr(k, "dout", a.dout);
  detail::check_ptr(k, "lse", a.lse);
  detail::check_ptr(k, "dq", a.dq);
  detail::check_ptr(k, "dk", a.dk);
  detail::check_ptr(k, "dv", a.dv);
}

void attention_fwd_cpu(const AttentionFwdArgs& a) {
  attention_fwd_check(a);
  const float scale = attention_scale(a.scale, a.head_dim);
  cpu::dispatch_float(a.dtype, "attention_fwd", "dtype", [&](auto tag) {
    using T = decltype(tag);
    const int64_t S = a.seq, D = a.head_dim, group = a.heads / a.kv_heads, plane = S * D;
    std::vector<float> q(plane), k(plane), v(plane), o(D), p(S);
    const T* qp = cpu::as<T>(a.q);
    const T* kp = cpu::as<T>(a.k);
    const T* vp = cpu::as<T>(a.v);
    T* op = cpu::as<T>(a.out);
    for (int64_t n = 0; n < a.batch; ++n) {
      for (int64_t g = 0; g < a.kv_heads; ++g) {
        const int64_t kv_off = (n * a.kv_heads + g) * plane;
        cpu::load_row(kp + kv_off, plane, k.data());
        cpu::load_row(vp + kv_off, plane, v.data());
        for (int64_t hh = 0; hh < group; ++hh) {
          const int64_t h = g * group + hh, q_off = (n * a.heads + h) * plane;
          cpu::load_row(qp + q_off, plane, q.data());
          for (int64_t i = 0; i < S; ++i) {
            const int64_t jn = a.causal ? i + 1 : S;
            const float* qi = q.data() + i * D;
            float m = -std::numeric_limits<float>::infinity();
            for (int64_t j = 0; j < jn; ++j) {
              p[j] = scale * cpu::dot8(qi, k.data() + j * D, D);
              m = std::max(m, p[j]);
            }
            for (int64_t j = 0; j < jn; ++j) p[j] = std::exp(p[j] - m);
            const float l = cpu::sum8(p.data(), jn);
            std::fill(o.begin(), o.end(), 0.f);
            for (int64_t j = 0; j < jn; ++j) axpy(p[j], v.data() + j * D, o.data(), D);
            const float inv = 1.f / l;
            for (int64_t e = 0; e < D; ++e) o[e] *= inv;
            cpu::store_row(o.data(), D, op + q_off + i * D);
            if (a.lse) a.lse[(n * a.heads + h) * S + i] = m + std::log(l);
          }
        }
      }
    }
  });
}

void attention_bwd_cpu(const AttentionBwdArgs& a) {
  attention_bwd_check(a);
  const float scale = attention_scale(a.scale, a.head_dim);
  cpu::dispatch_float(a.dtype, "attention_bwd", "dtype", [&](auto tag) {
    using T = decltype(tag);
    const int64_t S = a.seq, D = a.head_dim, group = a.heads / a.kv_heads, plane = S * D;
    std::vector<float> q(plane), k(plane), v(plane), o(plane), dout(plane), dq(plane),
        dk(plane), dv(plane), Di(S);
    for (int64_t n = 0; n < a.batch; ++n) {
      for (int64_t g = 0; g < a.kv_heads; ++g) {
        const int64_t kv_off = (n * a.kv_heads + g) * plane;
        cpu::load_row(cpu::as<T>(a.k) + kv_off, plane, k.data());
        cpu::load_row(cpu::as<T>(a.v) + kv_off, plane, v.data());
        std::fill(dk.begin(), dk.end(), 0.f);
        std::fill(dv.begin(), dv.end(), 0.f);
        for (int64_t hh = 0; hh < group; ++hh) {
          const int64_t h = g * group + hh, q_off = (n * a.heads + h) * plane;
          const float* lse = a.lse + (n * a.heads + h) * S;
          cpu::load_row(cpu::as<T>(a.q) + q_off, plane, q.data());
          cpu::load_row(cpu::as<T>(a.out) + q_off, plane, o.data());
          cpu::load_row(cpu::as<T>(a.dout) + q_off, plane, dout.data());
          std::fill(dq.begin(), dq.end(), 0.f);
          for (int64_t i = 0; i < S; ++i) Di[i] = cpu::dot8(dout.data() + i * D, o.data() + i * D, D);
          for (int64_t i = 0; i < S; ++i) {
            const int64_t jn = a.causal ? i + 1 : S;
            const float* qi = q.data() + i * D;
            const float* doi = dout.data() + i * D;
            float* dqi = dq.data() + i * D;
            for (int64_t j = 0; j < jn; ++j) {
              const float* kj = k.data() + j * D;
              const float p = std::exp(scale * cpu::dot8(qi, kj, D) - lse[i]);
              const float ds = p * (cpu::dot8(doi, v.data() + j * D, D) - Di[i]);
              axpy(p, doi, dv.data() + j * D, D);
              axpy(scale * ds, kj, dqi, D);
              axpy(scale * ds, qi, dk.data() + j * D, D);
            }
          }
          cpu::store_row(dq.data(), plane, cpu::as<T>(a.dq) + q_off);
        }
        cpu::store_row(dk.data(), plane, cpu::as<T>(a.dk) + kv_off);
        cpu::store_row(dv.data(), plane, cpu::as<T>(a.dv) + kv_off);
      }
    }
  });
}

}  // namespace paralab::kernels
