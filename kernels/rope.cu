// kernels/rope.cu — CUDA rotary embeddings (formulas: rope.hpp).
// One block per row: the block first computes the row's D/2 (cos, sin) pairs in double into
// shared memory, then threads walk the (head, i) pairs of the row; dimensions past
// rotary_dim are copied. Every element is read and written by the same thread: y may alias x.
#include "kernels/cuda_utils.cuh"
#include "kernels/rope.hpp"

namespace paralab::kernels {
namespace {

using cu::ld;
using cu::st;

constexpr int kBlock = 256;

template <class T>
__global__ void __launch_bounds__(kBlock)
    rope_kernel(const T* x, T* y, int64_t rows, int heads, int head_dim, int rot_dim,
                int64_t batch, int64_t pos0, double base, float dir) {
  extern __shared__ float trig[];  // [0, half): cos, [half, 2*half): dir * sin
  const int half = rot_dim / 2;
  const int64_t row_len = int64_t(heads) * head_dim;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const double pos = double(r / batch + pos0);
    __syncthreads();  // the previous row's readers are done with trig
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
      const double ang = pos * pow(base, -2.0 * double(i) / double(rot_dim));
      double s, c;
      sincos(ang, &s, &c);
      trig[i] = float(c);
      trig[half + i] = dir * float(s);
    }
    __syncthreads();
    const T* xr = x + r * row_len;
    T* yr = y + r * row_len;
    for (int p = threadIdx.x; p < heads * half; p += blockDim.x) {
      const int h = p / half, i = p - h * half;
      const int64_t o = int64_t(h) * head_dim + i;
      const float x1 = ld(xr, o), x2 = ld(xr, o + half);
      const float c = trig[i], s = trig[half + i];
      st(yr, o, x1 * c - x2 * s);
      st(yr, o + half, x2 * c + x1 * s);
    }
    const int pass = head_dim - rot_dim;  // partial rotary: copy the rest
    if (pass > 0 && static_cast<const void*>(xr) != static_cast<const void*>(yr)) {
      for (int p = threadIdx.x; p < heads * pass; p += blockDim.x) {
        const int h = p / pass, j = rot_dim + (p - h * pass);
        const int64_t o = int64_t(h) * head_dim + j;
        st(yr, o, ld(xr, o));
      }
    }
  }
}

void launch(const RopeArgs& a, const char* kernel, float dir, cudaStream_t stream) {
  rope_check(a, kernel);
  if (a.heads * a.head_dim > (int64_t(1) << 30))
    detail::fail_arg(kernel, "heads*head_dim", std::to_string(a.heads * a.head_dim),
                     "row too long for the CUDA kernel (max 2^30)");
  const int rot = int(a.rotary_dim > 0 ? a.rotary_dim : a.head_dim);
  const size_t smem = sizeof(float) * size_t(rot);
  if (smem > 48 * 1024)
    detail::fail_arg(kernel, "rotary_dim", std::to_string(rot), "must be <= 12288 on CUDA");
  cu::dispatch_float(a.dtype, kernel, "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    rope_kernel<T><<<cu::grid_for(a.rows, 1), kBlock, smem, stream>>>(
        static_cast<const T*>(a.x), static_cast<T*>(a.y), a.rows, int(a.heads),
        int(a.head_dim), rot, a.batch, a.position_offset, a.base, dir);
    PARALAB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace

void rope_fwd_cuda(const RopeArgs& a, cudaStream_t stream) { launch(a, "rope_fwd", 1.f, stream); }
void rope_bwd_cuda(const RopeArgs& a, cudaStream_t stream) { launch(a, "rope_bwd", -1.f, stream); }

}  // namespace paralab::kernels
