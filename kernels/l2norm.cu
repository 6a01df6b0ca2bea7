// kernels/l2norm.cu — CUDA sum of squares (semantics: l2norm.hpp). Two launches: up to
// kMaxBlocks blocks each reduce a grid-stride share into one partial (block_sum), then one
// block adds the partials in index order into *out. Both steps have a fixed order, so the
// result is bit-reproducible for a given n (no atomics).
#include "kernels/cuda_utils.cuh"
#include "kernels/l2norm.hpp"

namespace paralab::kernels {
namespace {

using cu::ld;

constexpr int kBlock = 256;
constexpr int kMaxBlocks = 1024;

template <class T>
__global__ void __launch_bounds__(kBlock) sumsq_partial_kernel(const T* x, int64_t n,
                                                                float* partial) {
  __shared__ float scratch[32];
  float acc = 0.f;
  const int64_t stride = int64_t(gridDim.x) * kBlock;
  for (int64_t i = int64_t(blockIdx.x) * kBlock + threadIdx.x; i < n; i += stride) {
    const float v = ld(x, i);
    acc += v * v;
  }
  acc = cu::block_sum(acc, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void __launch_bounds__(kMaxBlocks)
    sumsq_final_kernel(const float* partial, int nparts, float* out, bool accumulate) {
  __shared__ float scratch[32];
  const float v = threadIdx.x < nparts ? partial[threadIdx.x] : 0.f;
  const float total = cu::block_sum(v, scratch);
  if (threadIdx.x == 0) *out = accumulate ? *out + total : total;
}

}  // namespace

void l2norm_sq_cuda(const L2NormSqArgs& a, cudaStream_t stream) {
  l2norm_sq_check(a);
  const unsigned blocks = cu::grid_for(a.n, int64_t(kBlock) * 16, kMaxBlocks);
  void* scratch = nullptr;
  PARALAB_CUDA_CHECK(cudaMallocAsync(&scratch, sizeof(float) * blocks, stream));
  float* partial = static_cast<float*>(scratch);
  try {
    cu::dispatch_float(a.dtype, "l2norm_sq", "dtype", [&](auto tag) {
      using T = cu::elem_t<decltype(tag)>;
      sumsq_partial_kernel<T><<<blocks, kBlock, 0, stream>>>(static_cast<const T*>(a.buf), a.n,
                                                             partial);
      PARALAB_CUDA_CHECK_LAUNCH();
    });
    sumsq_final_kernel<<<1, kMaxBlocks, 0, stream>>>(partial, int(blocks), a.out, a.accumulate);
    PARALAB_CUDA_CHECK_LAUNCH();
  } catch (...) {
    cudaFreeAsync(scratch, stream);
    throw;
  }
  PARALAB_CUDA_CHECK(cudaFreeAsync(scratch, stream));
}

}  // namespace paralab::kernels
