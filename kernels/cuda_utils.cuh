// kernels/cuda_utils.cuh — device-side helpers shared by the .cu files (internal; never
// included by host-only code): typed loads/stores that widen to fp32, dtype dispatch for
// launchers, warp/block reductions, and grid sizing.
//
// Conventions of every kernel here: fp32 compute, int64 element indices (tensors may exceed
// 2^31 elements), grid-stride loops so any grid size is correct, blockDim a multiple of 32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda_check.hpp"
#include "kernels/dtype.hpp"

namespace paralab::kernels::cu {

// ---- typed access: storage type T, fp32 in registers --------------------------------------
__device__ __forceinline__ float ld(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float ld(const __nv_bfloat16* p, int64_t i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ float ld(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ void st(float* p, int64_t i, float v) { p[i] = v; }
// __float2bfloat16_rn / __float2half_rn round to nearest even, like the host twins.
__device__ __forceinline__ void st(__nv_bfloat16* p, int64_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}
__device__ __forceinline__ void st(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }

// ---- dtype dispatch for launchers: calls f(T*{nullptr}) with T the device storage type ----
template <class F>
void dispatch_float(Dtype d, const char* kernel, const char* arg, F&& f) {
  switch (d) {
    case Dtype::f32: f(static_cast<float*>(nullptr)); return;
    case Dtype::bf16: f(static_cast<__nv_bfloat16*>(nullptr)); return;
    case Dtype::f16: f(static_cast<__half*>(nullptr)); return;
    default: detail::check_float_dtype(kernel, arg, d);  // throws
  }
}
template <class Tag> using elem_t = std::remove_pointer_t<Tag>;

// ---- reductions --------------------------------------------------------------------------
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide sum/max; every thread gets the result. `scratch` is a __shared__ float[32].
// The leading barrier makes back-to-back calls on the same scratch safe. The combination
// order is fixed by the thread layout, so results are deterministic run to run.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int nwarps = (blockDim.x + 31) >> 5;
  if (warp == 0) {
    float w = lane < nwarps ? scratch[lane] : 0.f;
    w = warp_sum(w);
    if (lane == 0) scratch[0] = w;
  }
  __syncthreads();
  return scratch[0];
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  v = warp_max(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int nwarps = (blockDim.x + 31) >> 5;
  if (warp == 0) {
    float w = lane < nwarps ? scratch[lane] : -INFINITY;
    w = warp_max(w);
    if (lane == 0) scratch[0] = w;
  }
  __syncthreads();
  return scratch[0];
}

// ---- launch sizing -----------------------------------------------------------------------
// Blocks for `work` items at `per_block` items per block, capped (kernels loop grid-stride).
inline unsigned grid_for(int64_t work, int64_t per_block, int64_t cap = int64_t(1) << 20) {
  const int64_t g = (work + per_block - 1) / per_block;
  return unsigned(std::max<int64_t>(1, std::min<int64_t>(g, cap)));
}

// Threads per block for a block-per-row kernel over `cols` elements: enough threads that
// each handles a few elements, a multiple of 32, between 32 and 1024.
inline int row_block(int64_t cols, int per_thread = 4) {
  int64_t t = (cols + per_thread - 1) / per_thread;
  t = std::min<int64_t>(1024, std::max<int64_t>(32, ((t + 31) / 32) * 32));
  return int(t);
}

// Raises a kernel's dynamic shared-memory limit to `bytes` (above the 48 KiB default a launch
// needs it; CUDA C++ Programming Guide, "Shared Memory").
template <class K>
void set_smem(K kernel, size_t bytes) {
  PARALAB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

}  // namespace paralab::kernels::cu

namespace paralab::kernels::cu {

// ---- stream-ordered scratch ------------------------------------------------------------
// Device scratch from the stream-ordered pool (cudaMallocAsync; cheap after the first call).
// release() frees with an error check; the destructor frees (unchecked) if an exception
// unwinds first.
class StreamScratch {
 public:
  StreamScratch(size_t bytes, cudaStream_t stream) : stream_(stream) {
    PARALAB_CUDA_CHECK(cudaMallocAsync(&p_, bytes > 0 ? bytes : 1, stream));
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  ~StreamScratch() {
    if (p_ != nullptr) cudaFreeAsync(p_, stream_);
  }
  float* f() const { return static_cast<float*>(p_); }
  void release() {
    void* p = p_;
    p_ = nullptr;
    PARALAB_CUDA_CHECK(cudaFreeAsync(p, stream_));
  }

 private:
  void* p_ = nullptr;
  cudaStream_t stream_;
};

// ---- deterministic column reduction --------------------------------------------------------
// For each column c of a [rows, cols] problem: out0[c] (+)= sum_r a0(r,c), out1[c] (+)=
// sum_r a1(r,c), where F::operator()(r, c, a0, a1) adds its terms into a0, a1. Used for
// param/bias grads (dgamma, dbeta, dbias). Two stages, both in a fixed order (deterministic,
// no atomics): (1) blocks of 32 columns x 16 row lanes each reduce one chunk of rows into a
// partial row of a scratch [chunks, cols] buffer; (2) one thread per column adds the chunk
// partials in chunk order. The chunk count depends only on the shape (not on the GPU), so the
// result is bit-reproducible everywhere. out0 or out1 may be null (that sum is dropped).
constexpr int kColTile = 32;
constexpr int kColLanes = 16;
constexpr int64_t kColTargetBlocks = 1024;  // stage-1 blocks to aim for (fills an H100)
constexpr int64_t kColMinChunkRows = 256;   // rows per chunk at least

template <class F>
__global__ void __launch_bounds__(kColTile * kColLanes)
    col_partial_kernel(F f, int64_t rows, int64_t cols, int64_t chunk, float* part0,
                       float* part1) {
  __shared__ float s0[kColLanes][kColTile + 1];
  __shared__ float s1[kColLanes][kColTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t r_begin = int64_t(blockIdx.y) * chunk;
  const int64_t r_end = r_begin + chunk < rows ? r_begin + chunk : rows;
  for (int64_t c0 = int64_t(blockIdx.x) * kColTile; c0 < cols;
       c0 += int64_t(gridDim.x) * kColTile) {
    const int64_t c = c0 + tx;
    float a0 = 0.f, a1 = 0.f;
    if (c < cols)
      for (int64_t r = r_begin + ty; r < r_end; r += kColLanes) f(r, c, a0, a1);
    s0[ty][tx] = a0;
    s1[ty][tx] = a1;
    __syncthreads();
    if (ty == 0 && c < cols) {
      float t0 = 0.f, t1 = 0.f;
      for (int k = 0; k < kColLanes; ++k) {
        t0 += s0[k][tx];
        t1 += s1[k][tx];
      }
      part0[int64_t(blockIdx.y) * cols + c] = t0;
      if (part1 != nullptr) part1[int64_t(blockIdx.y) * cols + c] = t1;
    }
    __syncthreads();  // s0/s1 are rewritten by the next column tile
  }
}

static __global__ void col_final_kernel(const float* part0, const float* part1, int64_t chunks,
                                 int64_t cols, float* out0, float* out1, bool accumulate) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < cols; c += stride) {
    float t0 = 0.f, t1 = 0.f;
    for (int64_t k = 0; k < chunks; ++k) {
      t0 += part0[k * cols + c];
      if (part1 != nullptr) t1 += part1[k * cols + c];
    }
    if (out0 != nullptr) out0[c] = accumulate ? out0[c] + t0 : t0;
    if (out1 != nullptr) out1[c] = accumulate ? out1[c] + t1 : t1;
  }
}

template <class F>
void col_reduce(const F& f, int64_t rows, int64_t cols, float* out0, float* out1,
                bool accumulate, cudaStream_t stream) {
  const int64_t col_blocks = std::min<int64_t>((cols + kColTile - 1) / kColTile, 65535);
  int64_t chunks = std::min<int64_t>(kColTargetBlocks / col_blocks, rows / kColMinChunkRows);
  chunks = std::max<int64_t>(1, std::min<int64_t>(chunks, 65535));
  const int64_t chunk = (rows + chunks - 1) / chunks;
  chunks = (rows + chunk - 1) / chunk;  // no empty chunk
  const bool two = out1 != nullptr;
  StreamScratch part(sizeof(float) * size_t(chunks * cols) * (two ? 2 : 1), stream);
  float* part1 = two ? part.f() + chunks * cols : nullptr;
  col_partial_kernel<F><<<dim3(unsigned(col_blocks), unsigned(chunks)), dim3(kColTile, kColLanes),
                          0, stream>>>(f, rows, cols, chunk, part.f(), part1);
  PARALAB_CUDA_CHECK_LAUNCH();
  col_final_kernel<<<grid_for(cols, 256, 65535), 256, 0, stream>>>(part.f(), part1, chunks, cols,
                                                                   out0, out1, accumulate);
  PARALAB_CUDA_CHECK_LAUNCH();
  part.release();
}

}  // namespace paralab::kernels::cu

namespace paralab::kernels::cu {

// ---- generic elementwise launcher over a [rows, cols] index space ---------------------------
// F provides `struct State`, `load(r, c, State&)` and `store(r, c, const State&)`. Each thread
// first issues kEwUnroll independent loads (columns c0 + k*blockDim + tid), then computes and
// stores: enough bytes in flight per warp to approach copy bandwidth without vector types.
// Rows walk gridDim.y (no 64-bit division per element); flat buffers use rows = 1.
constexpr int kEwBlock = 256;
constexpr int kEwUnroll = 8;

template <class F>
__global__ void __launch_bounds__(kEwBlock) ew2d_kernel(F f, int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    for (int64_t c0 = int64_t(blockIdx.x) * kEwBlock * kEwUnroll; c0 < cols;
         c0 += int64_t(gridDim.x) * kEwBlock * kEwUnroll) {
      typename F::State s[kEwUnroll];
#pragma unroll
      for (int k = 0; k < kEwUnroll; ++k) {
        const int64_t c = c0 + k * kEwBlock + threadIdx.x;
        if (c < cols) f.load(r, c, s[k]);
      }
#pragma unroll
      for (int k = 0; k < kEwUnroll; ++k) {
        const int64_t c = c0 + k * kEwBlock + threadIdx.x;
        if (c < cols) f.store(r, c, s[k]);
      }
    }
  }
}

template <class F>
void launch_ew2d(const F& f, int64_t rows, int64_t cols, cudaStream_t stream) {
  const dim3 grid(grid_for(cols, int64_t(kEwBlock) * kEwUnroll, int64_t(1) << 24),
                  unsigned(std::min<int64_t>(rows, 65535)));
  ew2d_kernel<F><<<grid, kEwBlock, 0, stream>>>(f, rows, cols);
  PARALAB_CUDA_CHECK_LAUNCH();
}

}  // namespace paralab::kernels::cu
