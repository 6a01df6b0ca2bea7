// kernels/gelu.cu — CUDA bias + GELU forward/backward (formulas: gelu.hpp). Elementwise
// through cu::launch_ew2d (rows on gridDim.y, so bias[c] needs no division); dbias by the
// deterministic column reduction, which recomputes dy * gelu'(x + b) in fp32 and runs
// before dx is written (dx may alias dy).
#include "kernels/cuda_utils.cuh"
#include "kernels/gelu.hpp"

namespace paralab::kernels {
namespace {

using cu::ld;
using cu::st;

template <class T>
struct GeluFwd {
  const T* x;
  const T* bias;
  T* y;
  int64_t cols;
  struct State { float u; };
  __device__ void load(int64_t r, int64_t c, State& s) const {
    s.u = ld(x, r * cols + c) + (bias != nullptr ? ld(bias, c) : 0.f);
  }
  __device__ void store(int64_t r, int64_t c, const State& s) const {
    st(y, r * cols + c, gelu_tanh(s.u));
  }
};

template <class T>
struct GeluBwd {
  const T* dy;
  const T* x;
  const T* bias;
  T* dx;
  int64_t cols;
  struct State { float u, d; };
  __device__ void load(int64_t r, int64_t c, State& s) const {
    const int64_t i = r * cols + c;
    s.u = ld(x, i) + (bias != nullptr ? ld(bias, c) : 0.f);
    s.d = ld(dy, i);
  }
  __device__ void store(int64_t r, int64_t c, const State& s) const {
    st(dx, r * cols + c, s.d * gelu_tanh_grad(s.u));
  }
};

template <class T>
struct GeluBiasGrad {
  const T* dy;
  const T* x;
  const T* bias;
  int64_t cols;
  __device__ void operator()(int64_t r, int64_t c, float& a0, float&) const {
    const int64_t i = r * cols + c;
    const float u = ld(x, i) + (bias != nullptr ? ld(bias, c) : 0.f);
    a0 += ld(dy, i) * gelu_tanh_grad(u);
  }
};

}  // namespace

void gelu_fwd_cuda(const GeluFwdArgs& a, cudaStream_t stream) {
  gelu_fwd_check(a);
  cu::dispatch_float(a.dtype, "gelu_fwd", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    cu::launch_ew2d(GeluFwd<T>{static_cast<const T*>(a.x), static_cast<const T*>(a.bias),
                               static_cast<T*>(a.y), a.cols},
                    a.rows, a.cols, stream);
  });
}

void gelu_bwd_cuda(const GeluBwdArgs& a, cudaStream_t stream) {
  gelu_bwd_check(a);
  cu::dispatch_float(a.dtype, "gelu_bwd", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    const T* dy = static_cast<const T*>(a.dy);
    const T* x = static_cast<const T*>(a.x);
    const T* bias = static_cast<const T*>(a.bias);
    if (a.dbias != nullptr)
      cu::col_reduce(GeluBiasGrad<T>{dy, x, bias, a.cols}, a.rows, a.cols, a.dbias, nullptr,
                     a.accumulate, stream);
    cu::launch_ew2d(GeluBwd<T>{dy, x, bias, static_cast<T*>(a.dx), a.cols}, a.rows, a.cols,
                    stream);
  });
}

}  // namespace paralab::kernels
