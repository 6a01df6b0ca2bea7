// kernels/cast_cpu.cpp — CPU twin of the dtype cast (semantics: cast.hpp / dtype.hpp).
#include "kernels/cast.hpp"
#include "kernels/cpu_util.hpp"

namespace paralab::kernels {

void cast_check(const CastArgs& a) {
  const char* k = "cast";
  detail::check_positive(k, "n", a.n);
  detail::check_any_dtype(k, "src_dtype", a.src_dtype);
  detail::check_any_dtype(k, "dst_dtype", a.dst_dtype);
  detail::check_ptr(k, "src", a.src);
  detail::check_ptr(k, "dst", a.dst);
}

void cast_cpu(const CastArgs& a) {
  cast_check(a);
  cpu::dispatch_any(a.src_dtype, "cast", "src_dtype", [&](auto stag) {
    using S = decltype(stag);
    cpu::dispatch_any(a.dst_dtype, "cast", "dst_dtype", [&](auto dtag) {
      using D = decltype(dtag);
      const S* src = cpu::as<S>(a.src);
      D* dst = cpu::as<D>(a.dst);
      for (int64_t i = 0; i < a.n; ++i) dst[i] = from_f32<D>(to_f32(src[i]));
    });
  });
}

}  // namespace paralab::kernels
