// kernels/attention.cu — fused flash-style attention forward and backward (formulas:
// attention.hpp). Correctness first: fp32 CUDA-core math, no tensor cores yet.
//
// bf16/fp16 with head_dim <= 128 go to the tensor-core kernels of attention_mma.cu; these
// fp32 CUDA-core kernels take fp32 and wider heads.
//
// Forward (Dao et al. 2022, Alg. 1 with the FlashAttention-2 loop order): a block owns 32
// query rows of one (batch, head) (8 warps x 4 rows) kept in shared memory as fp32, and
// streams 32-key tiles of K and V through shared memory. For each row, lane j scores key j
// of the tile, the warp combines max and sum by shuffles (online softmax: rescale by
// exp(m_old - m_new)), and each lane accumulates its head_dim/32 output dims.
// Backward (FlashAttention-2, Alg. 2, split in two passes to avoid atomics):
//   D_i = dO_i . O_i (one warp per row), then a dQ pass shaped like the forward (query
//   rows resident, K/V tiles streamed), then a dK/dV pass with the roles swapped (32 keys
//   resident per block, Q/dO tiles of every q head of the group streamed). P is recomputed
//   from the saved lse in both passes. Deterministic: fixed order, no atomics.
// Shared-memory rows that lanes read row-wise are padded to head_dim+1 floats (odd stride
// for even head_dim: conflict-free). head_dim <= 256 (DPL = dims per lane <= 8).
#include "kernels/attention.hpp"
#include "kernels/attention_mma.hpp"
#include "kernels/cuda_utils.cuh"

namespace paralab::kernels {
namespace {

using cu::ld;
using cu::st;

constexpr int kWarps = 8;
constexpr int kRowsPerWarp = 4;
constexpr int kTile = kWarps * kRowsPerWarp;  // rows resident per block (queries or keys)
constexpr int kKeys = 32;                     // streamed rows per tile (= warp size)
constexpr int kThreads = kWarps * 32;
constexpr unsigned kFull = 0xffffffffu;

// Copies rows [r0, r0 + nrows) of a [S, D] plane into smem with row stride `stride` as fp32,
// zero-filling rows past S.
template <class T>
__device__ void load_tile(const T* plane, int r0, int nrows, int S, int D, float* dst,
                          int stride) {
  for (int idx = threadIdx.x; idx < nrows * D; idx += kThreads) {
    const int r = idx / D, e = idx - r * D;
    dst[r * stride + e] = (r0 + r < S) ? ld(plane, int64_t(r0 + r) * D + e) : 0.f;
  }
}

// ---- forward ------------------------------------------------------------------------------
template <class T, int DPL>
__global__ void __launch_bounds__(kThreads)
    flash_fwd_kernel(const T* q, const T* k, const T* v, T* out, float* lse, int heads,
                     int kv_heads, int S, int D, float scale, bool causal) {
  extern __shared__ float smem[];
  float* Qs = smem;                  // [kTile][D]
  float* Ks = Qs + kTile * D;        // [kKeys][D+1]
  float* Vs = Ks + kKeys * (D + 1);  // [kKeys][D]
  const int h = blockIdx.y, n = blockIdx.z, g = h / (heads / kv_heads);
  const int q0 = blockIdx.x * kTile;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t q_off = (int64_t(n) * heads + h) * S * D;
  const int64_t kv_off = (int64_t(n) * kv_heads + g) * S * D;

  load_tile(q + q_off, q0, kTile, S, D, Qs, D);
  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][DPL];
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    m[rr] = -INFINITY;
    l[rr] = 0.f;
#pragma unroll
    for (int t = 0; t < DPL; ++t) acc[rr][t] = 0.f;
  }
  const int k_end = (causal && q0 + kTile < S) ? q0 + kTile : S;
  for (int k0 = 0; k0 < k_end; k0 += kKeys) {
    __syncthreads();  // previous tile fully consumed (first pass: Q tile complete)
    load_tile(k + kv_off, k0, kKeys, S, D, Ks, D + 1);
    load_tile(v + kv_off, k0, kKeys, S, D, Vs, D);
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int r = warp * kRowsPerWarp + rr, qi = q0 + r;  // warp-uniform
      if (qi >= S) continue;
      const int kj = k0 + lane;
      float s = -INFINITY;
      if (kj < S && (!causal || kj <= qi)) {
        const float* qr = Qs + r * D;
        const float* kr = Ks + lane * (D + 1);
        float dot = 0.f;
        for (int e = 0; e < D; ++e) dot += qr[e] * kr[e];
        s = scale * dot;
      }
      const float m_new = fmaxf(m[rr], cu::warp_max(s));
      if (m_new == -INFINITY) continue;  // no unmasked key yet (uniform across the warp)
      const float p = expf(s - m_new);   // masked: exp(-inf) = 0
      const float alpha = expf(m[rr] - m_new);
      l[rr] = l[rr] * alpha + cu::warp_sum(p);
      m[rr] = m_new;
#pragma unroll
      for (int t = 0; t < DPL; ++t) acc[rr][t] *= alpha;
      for (int j = 0; j < kKeys; ++j) {
        const float pj = __shfl_sync(kFull, p, j);
        const float* vr = Vs + j * D;
#pragma unroll
        for (int t = 0; t < DPL; ++t) {
          const int e = lane + 32 * t;
          if (e < D) acc[rr][t] += pj * vr[e];
        }
      }
    }
  }
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int qi = q0 + warp * kRowsPerWarp + rr;
    if (qi >= S) continue;
    const float inv = l[rr] > 0.f ? 1.f / l[rr] : 0.f;
#pragma unroll
    for (int t = 0; t < DPL; ++t) {
      const int e = lane + 32 * t;
      if (e < D) st(out, q_off + int64_t(qi) * D + e, acc[rr][t] * inv);
    }
    if (lane == 0 && lse != nullptr)
      lse[(int64_t(n) * heads + h) * S + qi] = l[rr] > 0.f ? m[rr] + logf(l[rr]) : -INFINITY;
  }
}

// ---- backward: D_i = dO_i . O_i ------------------------------------------------------------
template <class T>
__global__ void __launch_bounds__(kThreads)
    flash_bwd_dot_kernel(const T* dout, const T* o, float* Dvec, int64_t rows, int D) {
  const int lane = threadIdx.x & 31;
  const int64_t w0 = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  for (int64_t r = w0; r < rows; r += int64_t(gridDim.x) * kWarps) {
    float s = 0.f;
    for (int e = lane; e < D; e += 32) s += ld(dout, r * D + e) * ld(o, r * D + e);
    s = cu::warp_sum(s);
    if (lane == 0) Dvec[r] = s;
  }
}

// ---- backward: dQ (query rows resident, K/V streamed) ------------------------------------
template <class T, int DPL>
__global__ void __launch_bounds__(kThreads)
    flash_bwd_dq_kernel(const T* q, const T* k, const T* v, const T* dout, const float* lse,
                        const float* Dvec, T* dq, int heads, int kv_heads, int S, int D,
                        float scale, bool causal) {
  extern __shared__ float smem[];
  float* Qs = smem;                   // [kTile][D]
  float* dOs = Qs + kTile * D;        // [kTile][D]
  float* Ks = dOs + kTile * D;        // [kKeys][D+1]
  float* Vs = Ks + kKeys * (D + 1);   // [kKeys][D+1]
  const int h = blockIdx.y, n = blockIdx.z, g = h / (heads / kv_heads);
  const int q0 = blockIdx.x * kTile;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t q_off = (int64_t(n) * heads + h) * S * D;
  const int64_t kv_off = (int64_t(n) * kv_heads + g) * S * D;
  const int64_t row_off = (int64_t(n) * heads + h) * S;

  load_tile(q + q_off, q0, kTile, S, D, Qs, D);
  load_tile(dout + q_off, q0, kTile, S, D, dOs, D);
  float lse_r[kRowsPerWarp], D_r[kRowsPerWarp], acc[kRowsPerWarp][DPL];
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int qi = q0 + warp * kRowsPerWarp + rr;
    lse_r[rr] = qi < S ? lse[row_off + qi] : 0.f;
    D_r[rr] = qi < S ? Dvec[row_off + qi] : 0.f;
#pragma unroll
    for (int t = 0; t < DPL; ++t) acc[rr][t] = 0.f;
  }
  const int k_end = (causal && q0 + kTile < S) ? q0 + kTile : S;
  for (int k0 = 0; k0 < k_end; k0 += kKeys) {
    __syncthreads();
    load_tile(k + kv_off, k0, kKeys, S, D, Ks, D + 1);
    load_tile(v + kv_off, k0, kKeys, S, D, Vs, D + 1);
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int r = warp * kRowsPerWarp + rr, qi = q0 + r;
      if (qi >= S) continue;
      const int kj = k0 + lane;
      float ds = 0.f;
      if (kj < S && (!causal || kj <= qi)) {
        const float* qr = Qs + r * D;
        const float* dor = dOs + r * D;
        const float* kr = Ks + lane * (D + 1);
        const float* vr = Vs + lane * (D + 1);
        float sdot = 0.f, pdot = 0.f;
        for (int e = 0; e < D; ++e) {
          sdot += qr[e] * kr[e];
          pdot += dor[e] * vr[e];
        }
        const float p = expf(scale * sdot - lse_r[rr]);
        ds = p * (pdot - D_r[rr]);
      }
      for (int j = 0; j < kKeys; ++j) {
        const float dsj = __shfl_sync(kFull, ds, j);
        const float* kr = Ks + j * (D + 1);
#pragma unroll
        for (int t = 0; t < DPL; ++t) {
          const int e = lane + 32 * t;
          if (e < D) acc[rr][t] += dsj * kr[e];
        }
      }
    }
  }
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int qi = q0 + warp * kRowsPerWarp + rr;
    if (qi >= S) continue;
#pragma unroll
    for (int t = 0; t < DPL; ++t) {
      const int e = lane + 32 * t;
      if (e < D) st(dq, q_off + int64_t(qi) * D + e, scale * acc[rr][t]);
    }
  }
}

// ---- backward: dK, dV (key rows resident, Q/dO of every q head in the group streamed) ----
template <class T, int DPL>
__global__ void __launch_bounds__(kThreads)
    flash_bwd_dkdv_kernel(const T* q, const T* k, const T* v, const T* dout, const float* lse,
                          const float* Dvec, T* dk, T* dv, int heads, int kv_heads, int S, int D,
                          float scale, bool causal) {
  extern __shared__ float smem[];
  float* Ks = smem;                    // [kTile][D]   this block's keys
  float* Vs = Ks + kTile * D;          // [kTile][D]
  float* Qs = Vs + kTile * D;          // [kKeys][D+1] streamed queries (lane i reads row i)
  float* dOs = Qs + kKeys * (D + 1);   // [kKeys][D+1]
  float* lse_s = dOs + kKeys * (D + 1);  // [kKeys]
  float* D_s = lse_s + kKeys;            // [kKeys]
  const int g = blockIdx.y, n = blockIdx.z, group = heads / kv_heads;
  const int k0 = blockIdx.x * kTile;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t kv_off = (int64_t(n) * kv_heads + g) * S * D;

  load_tile(k + kv_off, k0, kTile, S, D, Ks, D);
  load_tile(v + kv_off, k0, kTile, S, D, Vs, D);
  float dk_acc[kRowsPerWarp][DPL], dv_acc[kRowsPerWarp][DPL];
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr)
#pragma unroll
    for (int t = 0; t < DPL; ++t) dk_acc[rr][t] = dv_acc[rr][t] = 0.f;
  // Causal: queries before k0 see none of this block's keys; start at the tile holding k0.
  const int q_begin = causal ? (k0 / kKeys) * kKeys : 0;
  for (int hh = 0; hh < group; ++hh) {
    const int h = g * group + hh;
    const int64_t q_off = (int64_t(n) * heads + h) * S * D;
    const int64_t row_off = (int64_t(n) * heads + h) * S;
    for (int q0 = q_begin; q0 < S; q0 += kKeys) {
      __syncthreads();  // previous tile consumed (first pass: K/V tiles complete)
      load_tile(q + q_off, q0, kKeys, S, D, Qs, D + 1);
      load_tile(dout + q_off, q0, kKeys, S, D, dOs, D + 1);
      if (threadIdx.x < kKeys) {
        const int qi = q0 + threadIdx.x;
        lse_s[threadIdx.x] = qi < S ? lse[row_off + qi] : 0.f;
        D_s[threadIdx.x] = qi < S ? Dvec[row_off + qi] : 0.f;
      }
      __syncthreads();
#pragma unroll
      for (int rr = 0; rr < kRowsPerWarp; ++rr) {
        const int r = warp * kRowsPerWarp + rr, kj = k0 + r;  // warp-uniform
        if (kj >= S) continue;
        const int qi = q0 + lane;
        float p = 0.f, ds = 0.f;
        if (qi < S && (!causal || kj <= qi)) {
          const float* qr = Qs + lane * (D + 1);
          const float* dor = dOs + lane * (D + 1);
          const float* kr = Ks + r * D;
          const float* vr = Vs + r * D;
          float sdot = 0.f, pdot = 0.f;
          for (int e = 0; e < D; ++e) {
            sdot += qr[e] * kr[e];
            pdot += dor[e] * vr[e];
          }
          p = expf(scale * sdot - lse_s[lane]);
          ds = p * (pdot - D_s[lane]);
        }
        for (int i = 0; i < kKeys; ++i) {
          const float pi = __shfl_sync(kFull, p, i);
          const float dsi = __shfl_sync(kFull, ds, i);
          const float* qr = Qs + i * (D + 1);
          const float* dor = dOs + i * (D + 1);
#pragma unroll
          for (int t = 0; t < DPL; ++t) {
            const int e = lane + 32 * t;
            if (e < D) {
              dv_acc[rr][t] += pi * dor[e];
              dk_acc[rr][t] += dsi * qr[e];
            }
          }
        }
      }
    }
  }
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int kj = k0 + warp * kRowsPerWarp + rr;
    if (kj >= S) continue;
#pragma unroll
    for (int t = 0; t < DPL; ++t) {
      const int e = lane + 32 * t;
      if (e < D) {
        st(dk, kv_off + int64_t(kj) * D + e, scale * dk_acc[rr][t]);
        st(dv, kv_off + int64_t(kj) * D + e, dv_acc[rr][t]);
      }
    }
  }
}

// ---- launch helpers ------------------------------------------------------------------------
void check_cuda_limits(const char* kname, int64_t batch, int64_t heads, int64_t kv_heads,
                       int64_t seq, int64_t head_dim) {
  if (head_dim > 256)
    detail::fail_arg(kname, "head_dim", std::to_string(head_dim), "CUDA kernels need <= 256");
  if (heads > 65535 || kv_heads > 65535)
    detail::fail_arg(kname, "heads", std::to_string(heads), "CUDA grid needs <= 65535");
  if (batch > 65535)
    detail::fail_arg(kname, "batch", std::to_string(batch), "CUDA grid needs <= 65535");
  if (seq * head_dim > (int64_t(1) << 31) - 1)
    detail::fail_arg(kname, "seq", std::to_string(seq), "seq * head_dim must be < 2^31");
}

// Calls f(std::integral_constant<int, DPL>) for the smallest DPL with 32 * DPL >= head_dim.
template <class F>
void dispatch_dpl(int64_t head_dim, F&& f) {
  if (head_dim <= 32) f(std::integral_constant<int, 1>{});
  else if (head_dim <= 64) f(std::integral_constant<int, 2>{});
  else if (head_dim <= 128) f(std::integral_constant<int, 4>{});
  else f(std::integral_constant<int, 8>{});
}

}  // namespace

void flash_attention_fwd_cuda(const AttentionFwdArgs& a, cudaStream_t stream) {
  attention_fwd_check(a);
  check_cuda_limits("attention_fwd", a.batch, a.heads, a.kv_heads, a.seq, a.head_dim);
  const float scale = attention_scale(a.scale, a.head_dim);
  if (attn_mma::eligible(a.dtype, a.head_dim)) return attn_mma::forward(a, scale, stream);
  const int S = int(a.seq), D = int(a.head_dim);
  const size_t smem = sizeof(float) * size_t(kTile * D + kKeys * (D + 1) + kKeys * D);
  const dim3 grid(unsigned((S + kTile - 1) / kTile), unsigned(a.heads), unsigned(a.batch));
  cu::dispatch_float(a.dtype, "attention_fwd", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    dispatch_dpl(a.head_dim, [&](auto dpl) {
      constexpr int DPL = decltype(dpl)::value;
      cu::set_smem(flash_fwd_kernel<T, DPL>, smem);
      flash_fwd_kernel<T, DPL><<<grid, kThreads, smem, stream>>>(
          static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v),
          static_cast<T*>(a.out), a.lse, int(a.heads), int(a.kv_heads), S, D, scale, a.causal);
      PARALAB_CUDA_CHECK_LAUNCH();
    });
  });
}

void flash_attention_bwd_cuda(const AttentionBwdArgs& a, cudaStream_t stream) {
  attention_bwd_check(a);
  check_cuda_limits("attention_bwd", a.batch, a.heads, a.kv_heads, a.seq, a.head_dim);
  const float scale = attention_scale(a.scale, a.head_dim);
  const int S = int(a.seq), D = int(a.head_dim);
  const int64_t rows = a.batch * a.heads * a.seq;
  cu::StreamScratch dvec(sizeof(float) * size_t(rows), stream);  // D_i = dO_i . O_i
  float* Dvec = dvec.f();
  cu::dispatch_float(a.dtype, "attention_bwd", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    const T* q = static_cast<const T*>(a.q);
    const T* k = static_cast<const T*>(a.k);
    const T* v = static_cast<const T*>(a.v);
    const T* dout = static_cast<const T*>(a.dout);
    flash_bwd_dot_kernel<T><<<cu::grid_for(rows, kWarps), kThreads, 0, stream>>>(
        dout, static_cast<const T*>(a.out), Dvec, rows, D);
    PARALAB_CUDA_CHECK_LAUNCH();
    if (attn_mma::eligible(a.dtype, a.head_dim)) return attn_mma::backward(a, scale, Dvec, stream);
    dispatch_dpl(a.head_dim, [&](auto dpl) {
      constexpr int DPL = decltype(dpl)::value;
      const size_t smem_dq = sizeof(float) * size_t(2 * kTile * D + 2 * kKeys * (D + 1));
      cu::set_smem(flash_bwd_dq_kernel<T, DPL>, smem_dq);
      const dim3 grid_q(unsigned((S + kTile - 1) / kTile), unsigned(a.heads),
                        unsigned(a.batch));
      flash_bwd_dq_kernel<T, DPL><<<grid_q, kThreads, smem_dq, stream>>>(
          q, k, v, dout, a.lse, Dvec, static_cast<T*>(a.dq), int(a.heads), int(a.kv_heads),
          S, D, scale, a.causal);
      PARALAB_CUDA_CHECK_LAUNCH();
      const size_t smem_kv =
          sizeof(float) * size_t(2 * kTile * D + 2 * kKeys * (D + 1) + 2 * kKeys);
      cu::set_smem(flash_bwd_dkdv_kernel<T, DPL>, smem_kv);
      const dim3 grid_k(unsigned((S + kTile - 1) / kTile), unsigned(a.kv_heads),
                        unsigned(a.batch));
      flash_bwd_dkdv_kernel<T, DPL><<<grid_k, kThreads, smem_kv, stream>>>(
          q, k, v, dout, a.lse, Dvec, static_cast<T*>(a.dk), static_cast<T*>(a.dv),
          int(a.heads), int(a.kv_heads), S, D, scale, a.causal);
      PARALAB_CUDA_CHECK_LAUNCH();
    });
  });
  dvec.release();
}

}  // namespace paralab::kernels
