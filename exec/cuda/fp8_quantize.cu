// paralab exec/cuda — FP8 quantization for cuBLASLt's e4m3 GEMMs (device_ops.hpp: amax,
// quantize_e4m3): per-tensor current scaling, Transformer Engine's recipe (scale = 448 / amax).
//
// Memory-bound: every linear GEMM of an FP8 step reads both bf16 operands twice (amax, then the
// scaled copy) and writes an e4m3 copy, about 5 bytes per element and 430 M elements per layer
// and micro-batch of gpu-1-fp8 (gpt-1.7b, 4,096 tokens; 30 % of them weights), so it must run
// at HBM speed (an element per thread with byte stores does not: bench/results/exec_cuda.md):
//   * vector path: 8 elements per thread and access (16-byte loads of bf16/f16, two of f32;
//     8-byte e4m3 stores), for operands whose rows start 16-byte aligned (cols and ld multiples
//     of 8, the pointer 16-byte aligned): every linear operand of the GPT and Llama scenarios;
//   * transposed copies through a 64 x 64 shared tile, read as 8-element vectors along x's rows
//     and written as 8-byte runs along q's rows (x's columns), both coalesced;
//   * anything else (odd widths, views at odd offsets) takes the scalar kernels.
// Both paths give bit-identical results (the conversion is kernels/dtype.hpp's OFP8 encoder),
// checked against the host twin by the [gpu] test "device FP8 quantization".
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "exec/cuda/device_elem.cuh"
#include "exec/cuda/device_ops.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/cuda_utils.cuh"
#include "kernels/dtype.hpp"

namespace paralab::exec::cuda::dev {

namespace {

namespace k = paralab::kernels;
using elem::load;

constexpr int kThreads = 256;
constexpr int kVec = 8;                   // elements per vector access
constexpr int kQuantRowBlocks = 1024;     // scalar path: rows in flight
constexpr int kTile = 32, kTileRows = 8;  // scalar transposed copy: 32 x 32 tiles, 32 x 8 threads
constexpr int kVTile = 64;                // vector transposed copy: 64 x 64 tiles, 256 threads
constexpr int kVTilePitch = kVTile + 4;   // bytes per shared row: 4-aligned, 2-way bank conflicts at most

__device__ __forceinline__ float fp8_scale(const float* amax) {
  const float a = amax[0];
  return a > 0.f && isfinite(a) ? 448.0f / a : 1.0f;
}

// ---- vector path ---------------------------------------------------------------------------

// Eight consecutive elements of storage type kT from x + i (i a multiple of 8; x 16-byte aligned).
template <T kT>
__device__ __forceinline__ void load8(const void* x, int64_t i, float (&f)[kVec]) {
  if constexpr (kT == T::f32) {
    const float4 a = *reinterpret_cast<const float4*>(static_cast<const float*>(x) + i);
    const float4 b = *reinterpret_cast<const float4*>(static_cast<const float*>(x) + i + 4);
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
  } else {
    const uint4 v = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(x) + i);
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    for (int j = 0; j < 4; ++j) {
      const auto lo = static_cast<uint16_t>(w[j] & 0xffffu), hi = static_cast<uint16_t>(w[j] >> 16);
      if constexpr (kT == T::bf16) f[2 * j] = k::bf16_bits_to_f32(lo), f[2 * j + 1] = k::bf16_bits_to_f32(hi);
      else f[2 * j] = k::f16_bits_to_f32(lo), f[2 * j + 1] = k::f16_bits_to_f32(hi);
    }
  }
}

// Offset of vector v of an [rows, cols] (ld) matrix, cv = cols / 8 vectors per row.
__device__ __forceinline__ int64_t vec_offset(int64_t v, int64_t cv, int64_t ld, bool contiguous) {
  if (contiguous) return v * kVec;
  const int64_t r = v / cv;
  return r * ld + (v - r * cv) * kVec;
}

template <T kT>
__global__ void amax_vec_kernel(const void* x, int64_t rows, int64_t cv, int64_t ld, float* amax) {
  __shared__ float scratch[32];
  const int64_t n = rows * cv, stride = int64_t(gridDim.x) * blockDim.x;
  const bool contiguous = ld == cv * kVec;
  float m = 0.f;
  // Two vectors per thread and iteration: two 16-byte loads in flight before either is used.
  for (int64_t v = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; v < n; v += 2 * stride) {
    float f[kVec], g[kVec];
    load8<kT>(x, vec_offset(v, cv, ld, contiguous), f);
    const bool second = v + stride < n;
    if (second) load8<kT>(x, vec_offset(v + stride, cv, ld, contiguous), g);
    for (int j = 0; j < kVec; ++j) m = fmaxf(m, fabsf(f[j]));
    if (second)
      for (int j = 0; j < kVec; ++j) m = fmaxf(m, fabsf(g[j]));
  }
  m = k::cu::block_max(m, scratch);
  // Non-negative floats order like their bit patterns as signed ints.
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<int*>(amax), __float_as_int(m));
}

// Eight scaled e4m3 codes packed little-endian (byte j = element j). On sm_89 and later the
// conversion is one instruction per pair, cvt.rn.satfinite.e4m3x2.f32 (PTX ISA 8.x, "cvt"):
// round to nearest even, finite values beyond 448 and infinities saturated to +-448, as
// kernels/dtype.hpp's OFP8 encoder does; the [gpu] test compares both paths with the host twin
// bit for bit. (NaN inputs give a NaN code either way, not necessarily with the same sign bit.)
// The hardware conversion matters: the software encoder costs about half the vector kernel.
__device__ __forceinline__ uint2 pack8(const float (&f)[kVec], float scale) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  auto pair = [&](int j) {
    return uint32_t(__nv_cvt_float2_to_fp8x2(make_float2(f[j] * scale, f[j + 1] * scale), __NV_SATFINITE, __NV_E4M3));
  };
  return make_uint2(pair(0) | pair(2) << 16, pair(4) | pair(6) << 16);
#else
  uint32_t lo = 0, hi = 0;
  for (int j = 0; j < 4; ++j) {
    lo |= uint32_t(k::f32_to_e4m3_bits(f[j] * scale)) << (8 * j);
    hi |= uint32_t(k::f32_to_e4m3_bits(f[j + 4] * scale)) << (8 * j);
  }
  return make_uint2(lo, hi);
#endif
}

// q[r][c] = e4m3(x[r][c] * scale); q is [rows, cols] contiguous, so vector v lands at q + 8 v.
template <T kT>
__global__ void quantize_vec_kernel(const void* x, int64_t rows, int64_t cv, int64_t ld, const float* amax, uint8_t* q,
                                    float* scale_inv) {
  const float scale = fp8_scale(amax);
  if (blockIdx.x == 0 && threadIdx.x == 0) scale_inv[0] = 1.0f / scale;
  const int64_t n = rows * cv, stride = int64_t(gridDim.x) * blockDim.x;
  const bool contiguous = ld == cv * kVec;
  for (int64_t v = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; v < n; v += stride) {
    float f[kVec];
    load8<kT>(x, vec_offset(v, cv, ld, contiguous), f);
    *reinterpret_cast<uint2*>(q + v * kVec) = pack8(f, scale);
  }
}

// q[c][r] = e4m3(x[r][c] * scale), q [cols, rows]; rows and cols multiples of 8. One 64 x 64
// tile of x per block iteration: 512 row vectors in (two per thread), codes into shared memory,
// then 512 runs of 8 bytes out along q's rows (two per thread, 8 threads per 64-byte q row).
template <T kT>
__global__ void quantize_t_vec_kernel(const void* x, int64_t rows, int64_t cols, int64_t ld, const float* amax,
                                      uint8_t* q, float* scale_inv) {
  __shared__ __align__(16) uint8_t tile[kVTile][kVTilePitch];
  const float scale = fp8_scale(amax);
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) scale_inv[0] = 1.0f / scale;
  const int t = threadIdx.x, lane8 = t % 8, row32 = t / 8;  // 8 vectors (or runs) x 32 rows per pass
  for (int64_t r0 = int64_t(blockIdx.y) * kVTile; r0 < rows; r0 += int64_t(gridDim.y) * kVTile)
    for (int64_t c0 = int64_t(blockIdx.x) * kVTile; c0 < cols; c0 += int64_t(gridDim.x) * kVTile) {
      for (int pass = 0; pass < 2; ++pass) {
        const int j = row32 + 32 * pass;  // tile row
        const int64_t r = r0 + j, c = c0 + lane8 * kVec;
        if (r < rows && c < cols) {
          float f[kVec];
          load8<kT>(x, r * ld + c, f);
          const uint2 p = pack8(f, scale);
          uint32_t* dst = reinterpret_cast<uint32_t*>(&tile[j][lane8 * kVec]);
          dst[0] = p.x, dst[1] = p.y;
        }
      }
      __syncthreads();
      for (int pass = 0; pass < 2; ++pass) {
        const int jc = row32 + 32 * pass;  // tile column = q row
        const int64_t c = c0 + jc, r = r0 + lane8 * kVec;
        if (c < cols && r < rows) {
          uint32_t lo = 0, hi = 0;
          for (int b = 0; b < 4; ++b) {
            lo |= uint32_t(tile[lane8 * kVec + b][jc]) << (8 * b);
            hi |= uint32_t(tile[lane8 * kVec + 4 + b][jc]) << (8 * b);
          }
          *reinterpret_cast<uint2*>(q + c * rows + r) = make_uint2(lo, hi);
        }
      }
      __syncthreads();  // the tile is rewritten by the next iteration
    }
}

// ---- scalar path: any shape, stride and alignment ------------------------------------------

__global__ void amax_kernel(const void* x, T t, int64_t rows, int64_t cols, int64_t ld, float* amax) {
  __shared__ float scratch[32];
  float m = 0.f;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, fabsf(load(x, t, r * ld + c)));
  m = k::cu::block_max(m, scratch);
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<int*>(amax), __float_as_int(m));
}

__global__ void quantize_kernel(const void* x, T t, int64_t rows, int64_t cols, int64_t ld, const float* amax,
                                uint8_t* q, float* scale_inv) {
  const float scale = fp8_scale(amax);
  if (blockIdx.x == 0 && threadIdx.x == 0) scale_inv[0] = 1.0f / scale;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      q[r * cols + c] = k::f32_to_e4m3_bits(load(x, t, r * ld + c) * scale);
}

// q[c][r] through a shared 32 x 32 tile (rows padded by one), reads and writes coalesced.
__global__ void quantize_t_kernel(const void* x, T t, int64_t rows, int64_t cols, int64_t ld, const float* amax,
                                  uint8_t* q, float* scale_inv) {
  __shared__ uint8_t tile[kTile][kTile + 1];
  const float scale = fp8_scale(amax);
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0) scale_inv[0] = 1.0f / scale;
  for (int64_t r0 = int64_t(blockIdx.y) * kTile; r0 < rows; r0 += int64_t(gridDim.y) * kTile)
    for (int64_t c0 = int64_t(blockIdx.x) * kTile; c0 < cols; c0 += int64_t(gridDim.x) * kTile) {
      for (int j = threadIdx.y; j < kTile; j += kTileRows) {
        const int64_t r = r0 + j, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[j][threadIdx.x] = k::f32_to_e4m3_bits(load(x, t, r * ld + c) * scale);
      }
      __syncthreads();
      for (int j = threadIdx.y; j < kTile; j += kTileRows) {
        const int64_t c = c0 + j, r = r0 + threadIdx.x;
        if (r < rows && c < cols) q[c * rows + r] = tile[threadIdx.x][j];
      }
      __syncthreads();
    }
}

// The vector path's conditions: a float type, whole vectors per row, every row 16-byte aligned.
bool vectorizable(const void* x, T t, int64_t cols, int64_t ld) {
  return (t == T::f32 || t == T::bf16 || t == T::f16) && cols % kVec == 0 && ld % kVec == 0 &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

// Launches kernel<kT> for the runtime dtype t (one of the vector path's float types).
template <template <T> class L, typename... A>
void dispatch(T t, A&&... a) {
  switch (t) {
    case T::f32: L<T::f32>::go(a...); break;
    case T::bf16: L<T::bf16>::go(a...); break;
    default: L<T::f16>::go(a...); break;
  }
}

unsigned vec_grid(int64_t vectors) { return k::cu::grid_for(vectors, kThreads, 4 * kQuantRowBlocks); }

template <T kT>
struct AmaxVec {
  static void go(const void* x, int64_t rows, int64_t cols, int64_t ld, float* amax, cudaStream_t s) {
    amax_vec_kernel<kT><<<vec_grid(rows * cols / kVec), kThreads, 0, s>>>(x, rows, cols / kVec, ld, amax);
  }
};
template <T kT>
struct QuantVec {
  static void go(const void* x, int64_t rows, int64_t cols, int64_t ld, const float* amax, uint8_t* q, float* inv,
                 cudaStream_t s) {
    quantize_vec_kernel<kT><<<vec_grid(rows * cols / kVec), kThreads, 0, s>>>(x, rows, cols / kVec, ld, amax, q, inv);
  }
};
template <T kT>
struct QuantTVec {
  static void go(const void* x, int64_t rows, int64_t cols, int64_t ld, const float* amax, uint8_t* q, float* inv,
                 cudaStream_t s) {
    const dim3 grid(static_cast<unsigned>(std::min<int64_t>((cols + kVTile - 1) / kVTile, 65535)),
                    static_cast<unsigned>(std::min<int64_t>((rows + kVTile - 1) / kVTile, 65535)));
    quantize_t_vec_kernel<kT><<<grid, kThreads, 0, s>>>(x, rows, cols, ld, amax, q, inv);
  }
};

}  // namespace

void amax(const void* x, T t, int64_t rows, int64_t cols, int64_t ld, float* amax_out, cudaStream_t stream) {
  if (rows * cols <= 0) return;
  if (vectorizable(x, t, cols, ld)) {
    dispatch<AmaxVec>(t, x, rows, cols, ld, amax_out, stream);
  } else {
    const auto grid = static_cast<unsigned>(std::min<int64_t>(rows, kQuantRowBlocks));
    amax_kernel<<<grid, kThreads, 0, stream>>>(x, t, rows, cols, ld, amax_out);
  }
  PARALAB_CUDA_CHECK_LAUNCH();
}

void quantize_e4m3(const void* x, T t, int64_t rows, int64_t cols, int64_t ld, bool transpose, const float* amax_in,
                   uint8_t* q, float* scale_inv, cudaStream_t stream) {
  if (rows * cols <= 0) return;
  // q's rows (x's columns when transposed) are written as 8-byte runs: q 8-byte aligned, and
  // when transposed, q rows of a whole number of runs (rows % 8).
  const bool vec = vectorizable(x, t, cols, ld) && reinterpret_cast<uintptr_t>(q) % 8 == 0 && (!transpose || rows % kVec == 0);
  if (vec && transpose) {
    dispatch<QuantTVec>(t, x, rows, cols, ld, amax_in, q, scale_inv, stream);
  } else if (vec) {
    dispatch<QuantVec>(t, x, rows, cols, ld, amax_in, q, scale_inv, stream);
  } else if (transpose) {
    const dim3 grid(static_cast<unsigned>(std::min<int64_t>((cols + kTile - 1) / kTile, 1024)),
                    static_cast<unsigned>(std::min<int64_t>((rows + kTile - 1) / kTile, 1024)));
    quantize_t_kernel<<<grid, dim3(kTile, kTileRows), 0, stream>>>(x, t, rows, cols, ld, amax_in, q, scale_inv);
  } else {
    const auto grid = static_cast<unsigned>(std::min<int64_t>(rows, 4 * kQuantRowBlocks));
    quantize_kernel<<<grid, kThreads, 0, stream>>>(x, t, rows, cols, ld, amax_in, q, scale_inv);
  }
  PARALAB_CUDA_CHECK_LAUNCH();
}

}  // namespace paralab::exec::cuda::dev
