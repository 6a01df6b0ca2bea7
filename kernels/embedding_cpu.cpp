// kernels/embedding_cpu.cpp — CPU twin of the vocab-parallel embedding (embedding.hpp).
#include <cstring>

#include "kernels/cpu_util.hpp"
#include "kernels/embedding.hpp"

namespace paralab::kernels {
namespace {

void check_common(const char* k, int64_t rows, int64_t hidden, int64_t vs, int64_t ve, Dtype d,
                  const int32_t* ids) {
  detail::check_positive(k, "rows", rows);
  detail::check_positive(k, "hidden", hidden);
  detail::check_float_dtype(k, "dtype", d);
  if (vs < 0) detail::fail_arg(k, "vocab_start", std::to_string(vs), "must be >= 0");
  if (ve <= vs)
    detail::fail_arg(k, "vocab_end", std::to_string(ve), "must be > vocab_start");
  if (ve > (int64_t(1) << 31))
    detail::fail_arg(k, "vocab_end", std::to_string(ve), "ids are int32: must be <= 2^31");
  detail::check_ptr(k, "ids", ids);
}

}  // namespace

void embedding_fwd_check(const EmbeddingFwdArgs& a) {
  const char* k = "embedding_fwd";
  check_common(k, a.rows, a.hidden, a.vocab_start, a.vocab_end, a.dtype, a.ids);
  detail::check_ptr(k, "table", a.table);
  detail::check_ptr(k, "out", a.out);
}

void embedding_bwd_check(const EmbeddingBwdArgs& a) {
  const char* k = "embedding_bwd";
  check_common(k, a.rows, a.hidden, a.vocab_start, a.vocab_end, a.dtype, a.ids);
  detail::check_ptr(k, "dout", a.dout);
  detail::check_ptr(k, "dtable", a.dtable);
}

void embedding_fwd_cpu(const EmbeddingFwdArgs& a) {
  embedding_fwd_check(a);
  cpu::dispatch_float(a.dtype, "embedding_fwd", "dtype", [&](auto tag) {
    using T = decltype(tag);
    const int64_t H = a.hidden;
    const T* table = cpu::as<T>(a.table);
    T* out = cpu::as<T>(a.out);
    for (int64_t r = 0; r < a.rows; ++r) {
      const int64_t id = a.ids[r];
      if (id >= a.vocab_start && id < a.vocab_end)
        std::memcpy(out + r * H, table + (id - a.vocab_start) * H, sizeof(T) * size_t(H));
      else
        for (int64_t c = 0; c < H; ++c) out[r * H + c] = from_f32<T>(0.f);
    }
  });
}

void embedding_bwd_cpu(const EmbeddingBwdArgs& a) {
  embedding_bwd_check(a);
  cpu::dispatch_float(a.dtype, "embedding_bwd", "dtype", [&](auto tag) {
    using T = decltype(tag);
    const int64_t H = a.hidden;
    if (!a.accumulate)
      std::memset(a.dtable, 0, sizeof(float) * size_t((a.vocab_end - a.vocab_start) * H));
    const T* dout = cpu::as<T>(a.dout);
    for (int64_t r = 0; r < a.rows; ++r) {
      const int64_t id = a.ids[r];
      if (id < a.vocab_start || id >= a.vocab_end) continue;
      float* dst = a.dtable + (id - a.vocab_start) * H;
      const T* src = dout + r * H;
      for (int64_t c = 0; c < H; ++c) dst[c] += to_f32(src[c]);
    }
  });
}

}  // namespace paralab::kernels
