// kernels/softmax.cu — CUDA scaled masked softmax (semantics: softmax.hpp).
//
// One warp per row (rows = batches * sq are many, sk is moderate): three passes over the
// row (max, sum of exp, normalize+store) with warp-shuffle reductions and no shared memory;
// re-reads of the row hit L1. Masked keys never enter max or sum; a row with no unmasked
// key is written as zeros.
#include "kernels/cuda_utils.cuh"
#include "kernels/softmax.hpp"

namespace paralab::kernels {
namespace {

using cu::ld;
using cu::st;

constexpr int kWarpsPerBlock = 4;

template <class T>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    softmax_fwd_kernel(const T* x, T* y, const uint8_t* mask, int64_t batches, int64_t sq,
                       int64_t sk, int64_t heads, float scale, bool causal) {
  const int lane = threadIdx.x & 31;
  const int64_t rows = batches * sq;
  const int64_t warp0 = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  const int64_t nwarps = int64_t(gridDim.x) * kWarpsPerBlock;
  for (int64_t row = warp0; row < rows; row += nwarps) {
    const int64_t n = row / sq, i = row - n * sq;
    // Keys [0, limit) pass the causal test (limit <= 0: the row is fully masked).
    const int64_t causal_end = i + (sk - sq) + 1;
    const int64_t limit = (causal && causal_end < sk) ? causal_end : sk;
    const uint8_t* m = mask != nullptr ? mask + ((n / heads) * sq + i) * sk : nullptr;
    const T* xr = x + row * sk;
    T* yr = y + row * sk;
    float mx = -INFINITY;
    for (int64_t j = lane; j < limit; j += 32)
      if (m == nullptr || m[j] == 0) mx = fmaxf(mx, scale * ld(xr, j));
    mx = cu::warp_max(mx);
    if (mx == -INFINITY) {  // fully masked row
      for (int64_t j = lane; j < sk; j += 32) st(yr, j, 0.f);
      continue;
    }
    float s = 0.f;
    for (int64_t j = lane; j < limit; j += 32)
      if (m == nullptr || m[j] == 0) s += expf(scale * ld(xr, j) - mx);
    const float inv = 1.f / cu::warp_sum(s);
    // Each lane reads x[j] before writing y[j] at the same j: y may alias x.
    for (int64_t j = lane; j < sk; j += 32) {
      const bool keep = j < limit && (m == nullptr || m[j] == 0);
      st(yr, j, keep ? expf(scale * ld(xr, j) - mx) * inv : 0.f);
    }
  }
}

template <class T>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    softmax_bwd_kernel(const T* dy, const T* y, T* dx, int64_t rows, int64_t sk, float scale) {
  const int lane = threadIdx.x & 31;
  const int64_t warp0 = int64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  const int64_t nwarps = int64_t(gridDim.x) * kWarpsPerBlock;
  for (int64_t row = warp0; row < rows; row += nwarps) {
    const T* dyr = dy + row * sk;
    const T* yr = y + row * sk;
    T* dxr = dx + row * sk;
    float s = 0.f;
    for (int64_t j = lane; j < sk; j += 32) s += ld(dyr, j) * ld(yr, j);
    s = cu::warp_sum(s);
    for (int64_t j = lane; j < sk; j += 32) {
      const float yj = ld(yr, j);
      st(dxr, j, scale * yj * (ld(dyr, j) - s));
    }
  }
}

}  // namespace

void scaled_masked_softmax_fwd_cuda(const SoftmaxFwdArgs& a, cudaStream_t stream) {
  softmax_fwd_check(a);
  cu::dispatch_float(a.dtype, "scaled_masked_softmax_fwd", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    softmax_fwd_kernel<T><<<cu::grid_for(a.batches * a.sq, kWarpsPerBlock), 32 * kWarpsPerBlock,
                            0, stream>>>(static_cast<const T*>(a.x), static_cast<T*>(a.y),
                                         a.mask, a.batches, a.sq, a.sk, a.heads, a.scale,
                                         a.causal);
    PARALAB_CUDA_CHECK_LAUNCH();
  });
}

void scaled_masked_softmax_bwd_cuda(const SoftmaxBwdArgs& a, cudaStream_t stream) {
  softmax_bwd_check(a);
  cu::dispatch_float(a.dtype, "scaled_masked_softmax_bwd", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    const int64_t rows = a.batches * a.sq;
    softmax_bwd_kernel<T><<<cu::grid_for(rows, kWarpsPerBlock), 32 * kWarpsPerBlock, 0,
                            stream>>>(static_cast<const T*>(a.dy), static_cast<const T*>(a.y),
                                      static_cast<T*>(a.dx), rows, a.sk, a.scale);
    PARALAB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace paralab::kernels
