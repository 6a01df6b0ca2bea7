// kernels/l2norm_cpu.cpp — CPU twin of the sum of squares (semantics: l2norm.hpp).
// Blocked fixed-order fp32 summation: 4096-element chunks summed with 8 accumulators, chunk
// sums again with 8 accumulators; error grows with log-ish depth instead of n.
#include <algorithm>

#include "kernels/cpu_util.hpp"
#include "kernels/l2norm.hpp"

namespace paralab::kernels {

void l2norm_sq_check(const L2NormSqArgs& a) {
  const char* k = "l2norm_sq";
  detail::check_positive(k, "n", a.n);
  detail::check_float_dtype(k, "dtype", a.dtype);
  detail::check_ptr(k, "buf", a.buf);
  detail::check_ptr(k, "out", a.out);
}

void l2norm_sq_cpu(const L2NormSqArgs& a) {
  l2norm_sq_check(a);
  const float total = cpu::dispatch_float(a.dtype, "l2norm_sq", "dtype", [&](auto tag) {
    using T = decltype(tag);
    const T* x = cpu::as<T>(a.buf);
    constexpr int64_t kChunk = 4096;
    float outer[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    float sq[kChunk];
    int64_t chunk = 0;
    for (int64_t i0 = 0; i0 < a.n; i0 += kChunk, ++chunk) {
      const int64_t m = std::min(kChunk, a.n - i0);
      for (int64_t i = 0; i < m; ++i) {
        const float v = to_f32(x[i0 + i]);
        sq[i] = v * v;
      }
      outer[chunk & 7] += cpu::sum8(sq, m);
    }
    return ((outer[0] + outer[1]) + (outer[2] + outer[3])) +
           ((outer[4] + outer[5]) + (outer[6] + outer[7]));
  });
  *a.out = a.accumulate ? *a.out + total : total;
}

}  // namespace paralab::kernels
