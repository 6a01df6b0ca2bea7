// kernels/cross_entropy_cpu.cpp — CPU twin of the vocab-parallel cross-entropy stages
// (semantics and shapes: cross_entropy.hpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu_util.hpp"
#include "kernels/cross_entropy.hpp"

namespace paralab::kernels {
namespace {

void check_rows_vocab(const char* k, int64_t rows, int64_t vocab, Dtype d) {
  detail::check_positive(k, "rows", rows);
  detail::check_positive(k, "vocab", vocab);
  detail::check_float_dtype(k, "dtype", d);
}
void check_vocab_start(const char* k, int64_t vs) {
  if (vs < 0) detail::fail_arg(k, "vocab_start", std::to_string(vs), "must be >= 0");
}

}  // namespace

void ce_local_max_check(const CeMaxArgs& a) {
  const char* k = "ce_local_max";
  check_rows_vocab(k, a.rows, a.vocab, a.dtype);
  detail::check_ptr(k, "logits", a.logits);
  detail::check_ptr(k, "row_max", a.row_max);
}

void ce_local_sumexp_check(const CeSumExpArgs& a) {
  const char* k = "ce_local_sumexp";
  check_rows_vocab(k, a.rows, a.vocab, a.dtype);
  check_vocab_start(k, a.vocab_start);
  detail::check_ptr(k, "logits", a.logits);
  detail::check_ptr(k, "targets", a.targets);
  detail::check_ptr(k, "row_max", a.row_max);
  detail::check_ptr(k, "sum_exp", a.sum_exp);
  detail::check_ptr(k, "target_logit", a.target_logit);
}

void ce_loss_check(const CeLossArgs& a) {
  const char* k = "ce_loss";
  detail::check_positive(k, "rows", a.rows);
  detail::check_ptr(k, "row_max", a.row_max);
  detail::check_ptr(k, "sum_exp", a.sum_exp);
  detail::check_ptr(k, "target_logit", a.target_logit);
  if (a.loss == nullptr && a.mean_loss == nullptr)
    detail::fail_arg(k, "loss", "null", "loss or mean_loss must be given");
}

void ce_bwd_check(const CeBwdArgs& a) {
  const char* k = "ce_bwd";
  check_rows_vocab(k, a.rows, a.vocab, a.dtype);
  check_vocab_start(k, a.vocab_start);
  detail::check_ptr(k, "logits", a.logits);
  detail::check_ptr(k, "targets", a.targets);
  detail::check_ptr(k, "row_max", a.row_max);
  detail::check_ptr(k, "sum_exp", a.sum_exp);
  detail::check_ptr(k, "dlogits", a.dlogits);
  detail::check_finite(k, "dloss_scale", a.dloss_scale);
}

void cross_entropy_fwd_check(const CrossEntropyArgs& a) {
  const char* k = "cross_entropy_fwd";
  check_rows_vocab(k, a.rows, a.vocab, a.dtype);
  detail::check_ptr(k, "logits", a.logits);
  detail::check_ptr(k, "targets", a.targets);
  detail::check_ptr(k, "row_max", a.row_max);
  detail::check_ptr(k, "sum_exp", a.sum_exp);
  if (a.loss == nullptr && a.mean_loss == nullptr)
    detail::fail_arg(k, "loss", "null", "loss or mean_loss must be given");
}

void ce_local_max_cpu(const CeMaxArgs& a) {
  ce_local_max_check(a);
  cpu::dispatch_float(a.dtype, "ce_local_max", "dtype", [&](auto tag) {
    using T = decltype(tag);
    const T* x = cpu::as<T>(a.logits);
    for (int64_t r = 0; r < a.rows; ++r) {
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t v = 0; v < a.vocab; ++v) m = std::max(m, to_f32(x[r * a.vocab + v]));
      a.row_max[r] = m;
    }
  });
}

void ce_local_sumexp_cpu(const CeSumExpArgs& a) {
  ce_local_sumexp_check(a);
  cpu::dispatch_float(a.dtype, "ce_local_sumexp", "dtype", [&](auto tag) {
    using T = decltype(tag);
    std::vector<float> e(a.vocab);
    const T* x = cpu::as<T>(a.logits);
    for (int64_t r = 0; r < a.rows; ++r) {
      const T* xr = x + r * a.vocab;
      const float m = a.row_max[r];
      for (int64_t v = 0; v < a.vocab; ++v) e[v] = std::exp(to_f32(xr[v]) - m);
      a.sum_exp[r] = cpu::sum8(e.data(), a.vocab);
      const int64_t t = int64_t(a.targets[r]) - a.vocab_start;
      a.target_logit[r] = (t >= 0 && t < a.vocab) ? to_f32(xr[t]) : 0.f;
    }
  });
}

void ce_loss_cpu(const CeLossArgs& a) {
  ce_loss_check(a);
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // fixed-order partial sums for the mean
  for (int64_t r = 0; r < a.rows; ++r) {
    const float l = std::log(a.sum_exp[r]) + a.row_max[r] - a.target_logit[r];
    if (a.loss) a.loss[r] = l;
    acc[r & 7] += l;
  }
  if (a.mean_loss)
    *a.mean_loss = (((acc[0] + acc[1]) + (acc[2] + acc[3])) +
                    ((acc[4] + acc[5]) + (acc[6] + acc[7]))) / float(a.rows);
}

void ce_bwd_cpu(const CeBwdArgs& a) {
  ce_bwd_check(a);
  cpu::dispatch_float(a.dtype, "ce_bwd", "dtype", [&](auto tag) {
    using T = decltype(tag);
    const T* x = cpu::as<T>(a.logits);
    T* dx = cpu::as<T>(a.dlogits);
    for (int64_t r = 0; r < a.rows; ++r) {
      const float m = a.row_max[r], inv = 1.f / a.sum_exp[r];
      const float g = a.dloss_scale * (a.dloss ? a.dloss[r] : 1.f);
      const int64_t t = int64_t(a.targets[r]) - a.vocab_start;
      for (int64_t v = 0; v < a.vocab; ++v) {
        const int64_t i = r * a.vocab + v;
        const float p = std::exp(to_f32(x[i]) - m) * inv;
        dx[i] = from_f32<T>((p - (v == t ? 1.f : 0.f)) * g);
      }
    }
  });
}

void cross_entropy_fwd_cpu(const CrossEntropyArgs& a) {
  cross_entropy_fwd_check(a);
  std::vector<float> tgt(a.rows);
  ce_local_max_cpu(CeMaxArgs{a.logits, a.row_max, a.rows, a.vocab, a.dtype});
  ce_local_sumexp_cpu(CeSumExpArgs{a.logits, a.targets, a.row_max, a.sum_exp, tgt.data(), a.rows,
                                   a.vocab, 0, a.dtype});
  ce_loss_cpu(CeLossArgs{a.row_max, a.sum_exp, tgt.data(), a.loss, a.mean_loss, a.rows});
}

}  // namespace paralab::kernels
