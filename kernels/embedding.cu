// kernels/embedding.cu — CUDA vocab-parallel embedding (semantics: embedding.hpp).
// Forward: one block per token row, a coalesced row copy (or zero fill). Backward: one block
// per token row, fp32 atomicAdd of the row into dtable (repeated ids collide only on the
// same row, so contention is low); dtable is zeroed first unless accumulating.
#include "kernels/cuda_utils.cuh"
#include "kernels/embedding.hpp"

namespace paralab::kernels {
namespace {

using cu::ld;
using cu::st;

template <class T>
__global__ void embedding_fwd_kernel(const int32_t* ids, const T* table, T* out, int64_t rows,
                                     int64_t hidden, int64_t vs, int64_t ve) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t id = ids[r];
    T* o = out + r * hidden;
    if (id >= vs && id < ve) {
      const T* src = table + (id - vs) * hidden;
      for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) o[c] = src[c];
    } else {
      for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) st(o, c, 0.f);
    }
  }
}

template <class T>
__global__ void embedding_bwd_kernel(const int32_t* ids, const T* dout, float* dtable,
                                     int64_t rows, int64_t hidden, int64_t vs, int64_t ve) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t id = ids[r];
    if (id < vs || id >= ve) continue;
    float* dst = dtable + (id - vs) * hidden;
    const T* src = dout + r * hidden;
    for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) atomicAdd(dst + c, ld(src, c));
  }
}

}  // namespace

void embedding_fwd_cuda(const EmbeddingFwdArgs& a, cudaStream_t stream) {
  embedding_fwd_check(a);
  cu::dispatch_float(a.dtype, "embedding_fwd", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    embedding_fwd_kernel<T><<<cu::grid_for(a.rows, 1), cu::row_block(a.hidden, 8), 0, stream>>>(
        a.ids, static_cast<const T*>(a.table), static_cast<T*>(a.out), a.rows, a.hidden,
        a.vocab_start, a.vocab_end);
    PARALAB_CUDA_CHECK_LAUNCH();
  });
}

void embedding_bwd_cuda(const EmbeddingBwdArgs& a, cudaStream_t stream) {
  embedding_bwd_check(a);
  if (!a.accumulate)
    PARALAB_CUDA_CHECK(cudaMemsetAsync(
        a.dtable, 0, sizeof(float) * size_t((a.vocab_end - a.vocab_start) * a.hidden), stream));
  cu::dispatch_float(a.dtype, "embedding_bwd", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    embedding_bwd_kernel<T><<<cu::grid_for(a.rows, 1), cu::row_block(a.hidden, 8), 0, stream>>>(
        a.ids, static_cast<const T*>(a.dout), a.dtable, a.rows, a.hidden, a.vocab_start,
        a.vocab_end);
    PARALAB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace paralab::kernels
