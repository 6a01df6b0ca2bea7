// kernels/l2norm.cu — CUDA sum of squares (semantics: l2norm.hpp). Two launches: up to
// kMaxBlocks blocks each reduce a grid-stride share into one partial (4 independent loads in
// flight per thread, then block_sum), then one block adds the partials in a fixed order into
// *out. Both steps have a fixed order and the block count depends only on n, so the result is
// bit-reproducible for a given n (no atomics).
#include "kernels/cuda_utils.cuh"
#include "kernels/l2norm.hpp"

namespace paralab::kernels {
namespace {

using cu::ld;

constexpr int kBlock = 256;
constexpr int kUnroll = 4;
constexpr int kMaxBlocks = 2048;
constexpr int kFinalThreads = 1024;

template <class T>
__global__ void __launch_bounds__(kBlock) sumsq_partial_kernel(const T* x, int64_t n,
                                                                float* partial) {
  __shared__ float scratch[32];
  float acc[kUnroll] = {0.f, 0.f, 0.f, 0.f};
  const int64_t stride = int64_t(gridDim.x) * kBlock;
  for (int64_t i0 = int64_t(blockIdx.x) * kBlock + threadIdx.x; i0 < n; i0 += stride * kUnroll) {
    float v[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const int64_t i = i0 + k * stride;
      v[k] = i < n ? ld(x, i) : 0.f;
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) acc[k] += v[k] * v[k];
  }
  const float t = cu::block_sum((acc[0] + acc[1]) + (acc[2] + acc[3]), scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = t;
}

__global__ void __launch_bounds__(kFinalThreads)
    sumsq_final_kernel(const float* partial, int nparts, float* out, bool accumulate) {
  __shared__ float scratch[32];
  float v = 0.f;
  for (int i = threadIdx.x; i < nparts; i += kFinalThreads) v += partial[i];
  const float total = cu::block_sum(v, scratch);
  if (threadIdx.x == 0) *out = accumulate ? *out + total : total;
}

}  // namespace

void l2norm_sq_cuda(const L2NormSqArgs& a, cudaStream_t stream) {
  l2norm_sq_check(a);
  const unsigned blocks = cu::grid_for(a.n, int64_t(kBlock) * kUnroll * 4, kMaxBlocks);
  cu::StreamScratch partial(sizeof(float) * blocks, stream);
  cu::dispatch_float(a.dtype, "l2norm_sq", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    sumsq_partial_kernel<T><<<blocks, kBlock, 0, stream>>>(static_cast<const T*>(a.buf), a.n,
                                                           partial.f());
    PARALAB_CUDA_CHECK_LAUNCH();
  });
  sumsq_final_kernel<<<1, kFinalThreads, 0, stream>>>(partial.f(), int(blocks), a.out,
                                                      a.accumulate);
  PARALAB_CUDA_CHECK_LAUNCH();
  partial.release();
}

}  // namespace paralab::kernels
