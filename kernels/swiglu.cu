// kernels/swiglu.cu — CUDA SwiGLU forward/backward (formulas: swiglu.hpp). Elementwise over
// the [rows, f] output index space with cu::launch_ew2d; each thread reads the gate and up
// values of its column and writes one (fwd) or two (bwd) outputs.
#include "kernels/cuda_utils.cuh"
#include "kernels/swiglu.hpp"

namespace paralab::kernels {
namespace {

using cu::ld;
using cu::st;

template <class T>
struct SwigluFwd {
  const T* x;
  T* y;
  int64_t f;
  struct State { float a, b; };
  __device__ void load(int64_t r, int64_t c, State& s) const {
    s.a = ld(x, r * 2 * f + c);
    s.b = ld(x, r * 2 * f + f + c);
  }
  __device__ void store(int64_t r, int64_t c, const State& s) const {
    st(y, r * f + c, silu(s.a) * s.b);
  }
};

template <class T>
struct SwigluBwd {
  const T* dy;
  const T* x;
  T* dx;
  int64_t f;
  struct State { float a, b, d; };
  __device__ void load(int64_t r, int64_t c, State& s) const {
    s.a = ld(x, r * 2 * f + c);
    s.b = ld(x, r * 2 * f + f + c);
    s.d = ld(dy, r * f + c);
  }
  __device__ void store(int64_t r, int64_t c, const State& s) const {
    st(dx, r * 2 * f + c, s.d * s.b * silu_grad(s.a));
    st(dx, r * 2 * f + f + c, s.d * silu(s.a));
  }
};

}  // namespace

void swiglu_fwd_cuda(const SwigluFwdArgs& a, cudaStream_t stream) {
  swiglu_fwd_check(a);
  cu::dispatch_float(a.dtype, "swiglu_fwd", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    cu::launch_ew2d(SwigluFwd<T>{static_cast<const T*>(a.x), static_cast<T*>(a.y), a.f}, a.rows,
                    a.f, stream);
  });
}

void swiglu_bwd_cuda(const SwigluBwdArgs& a, cudaStream_t stream) {
  swiglu_bwd_check(a);
  cu::dispatch_float(a.dtype, "swiglu_bwd", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    cu::launch_ew2d(SwigluBwd<T>{static_cast<const T*>(a.dy), static_cast<const T*>(a.x),
                                 static_cast<T*>(a.dx), a.f},
                    a.rows, a.f, stream);
  });
}

}  // namespace paralab::kernels
