// kernels/cast.cu — CUDA dtype cast (semantics: cast.hpp). bf16/f16 use the hardware
// round-to-nearest-even conversions; fp8 uses the shared __host__ __device__ encoders of
// dtype.hpp, so its bits match the CPU twin exactly.
#include "kernels/cast.hpp"
#include "kernels/cuda_utils.cuh"

namespace paralab::kernels {
namespace {

using cu::ld;
using cu::st;

__device__ __forceinline__ float ld(const f8e4m3_t* p, int64_t i) { return to_f32(p[i]); }
__device__ __forceinline__ float ld(const f8e5m2_t* p, int64_t i) { return to_f32(p[i]); }
__device__ __forceinline__ void st(f8e4m3_t* p, int64_t i, float v) {
  p[i] = from_f32<f8e4m3_t>(v);
}
__device__ __forceinline__ void st(f8e5m2_t* p, int64_t i, float v) {
  p[i] = from_f32<f8e5m2_t>(v);
}

template <class S, class D>
struct Cast {
  const S* src;
  D* dst;
  struct State { float v; };
  __device__ void load(int64_t, int64_t i, State& s) const { s.v = ld(src, i); }
  __device__ void store(int64_t, int64_t i, const State& s) const { st(dst, i, s.v); }
};

template <class F>
void dispatch_any(Dtype d, const char* arg, F&& f) {
  switch (d) {
    case Dtype::f32: f(static_cast<float*>(nullptr)); return;
    case Dtype::bf16: f(static_cast<__nv_bfloat16*>(nullptr)); return;
    case Dtype::f16: f(static_cast<__half*>(nullptr)); return;
    case Dtype::f8e4m3: f(static_cast<f8e4m3_t*>(nullptr)); return;
    case Dtype::f8e5m2: f(static_cast<f8e5m2_t*>(nullptr)); return;
  }
  detail::check_any_dtype("cast", arg, d);
}

}  // namespace

void cast_cuda(const CastArgs& a, cudaStream_t stream) {
  cast_check(a);
  dispatch_any(a.src_dtype, "src_dtype", [&](auto stag) {
    using S = cu::elem_t<decltype(stag)>;
    dispatch_any(a.dst_dtype, "dst_dtype", [&](auto dtag) {
      using D = cu::elem_t<decltype(dtag)>;
      cu::launch_ew2d(Cast<S, D>{static_cast<const S*>(a.src), static_cast<D*>(a.dst)}, 1, a.n,
                      stream);
    });
  });
}

}  // namespace paralab::kernels
