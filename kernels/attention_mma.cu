// kernels/attention_mma.cu — fused attention on the tensor cores: bf16/fp16 operands, fp32
// accumulation, online softmax in registers (formulas: attention.hpp).
//
// Same algorithm and split as the fp32 kernels of attention.cu (Dao et al. 2022, Alg. 1;
// Dao 2023, FlashAttention-2, Alg. 2 with D_i = dO_i . O_i, run as a dQ pass and a dK/dV pass:
// no atomics, deterministic), but every product is an `mma.sync.m16n8k16` (PTX ISA, "Matrix
// Fragments for mma.m16n8k16 with floating point type"): a warp owns 16 rows, A fragments
// come from shared memory, and the fp32 C fragment of S = Q K^T is reused as the A fragment of
// P V after rounding to 16 bits (FlashAttention-2, Sec. 3.3: the C layout of two adjacent
// 16x8 tiles is the A layout of one 16x16 tile). Softmax is in base 2: x = s * scale * log2(e),
// p = 2^(x - m); lse is stored in natural log.
//
// Fragment layout (g = lane / 4, t = lane % 4): A 16x16 row-major: regs {A[g][2t..2t+1]},
// {A[g+8][2t..]}, {A[g][2t+8..]}, {A[g+8][2t+8..]}; B 16x8 (k x n): {B[2t..2t+1][g]},
// {B[2t+8..2t+9][g]}; C 16x8 fp32: C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1].
// Tiles sit in shared memory as raw 16-bit words, row-major with rows padded by 8 elements
// (16 bytes): the 32-bit fragment loads of a warp then hit 32 distinct banks. Operands that
// the products need along the other axis (V for P V, K for dS K, Q and dO for the dK/dV
// products) get a transposed copy. head_dim is padded with zeros to DP in {32, 64, 96, 128}.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/attention_mma.hpp"
#include "kernels/cuda_utils.cuh"

namespace paralab::kernels::attn_mma {
namespace {

constexpr int kThreads = 128;  // 4 warps, 16 rows each
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr unsigned kFull = 0xffffffffu;

// One m16n8k16 product c += a b (fp32 accumulators) and the packing of two fp32 values into
// the operand type (low half = first), for T = __nv_bfloat16 or __half.
template <class T>
struct Mma {
  static constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    __trap();  // never launched there: eligible() needs compute capability 8.0
#else
    if constexpr (kBf16)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};\n"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};\n"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    if constexpr (kBf16) {
      const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
      return *reinterpret_cast<const uint32_t*>(&v);
    } else {
      const __half2 v = __floats2half2_rn(lo, hi);
      return *reinterpret_cast<const uint32_t*>(&v);
    }
  }
  // The A fragment of the 16x16 block [r][2kb*8 .. 2kb*8+15] of a C-layout row block held as
  // two 16x8 tiles x[2kb], x[2kb+1] (FlashAttention-2's register reuse).
  template <int N>
  static __device__ __forceinline__ void a_from_c(uint32_t (&a)[4], const float (&x)[N][4], int kb) {
    a[0] = pack(x[2 * kb][0], x[2 * kb][1]);
    a[1] = pack(x[2 * kb][2], x[2 * kb][3]);
    a[2] = pack(x[2 * kb + 1][0], x[2 * kb + 1][1]);
    a[3] = pack(x[2 * kb + 1][2], x[2 * kb + 1][3]);
  }
};

__device__ __forceinline__ uint32_t ld32(const uint16_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

// A fragment of the 16x16 block at (r0, c0) of a row-major tile with row stride ld.
__device__ __forceinline__ void frag_a(uint32_t (&a)[4], const uint16_t* m, int ld, int r0, int c0, int g, int t) {
  a[0] = ld32(m + (r0 + g) * ld + c0 + 2 * t);
  a[1] = ld32(m + (r0 + g + 8) * ld + c0 + 2 * t);
  a[2] = ld32(m + (r0 + g) * ld + c0 + 8 + 2 * t);
  a[3] = ld32(m + (r0 + g + 8) * ld + c0 + 8 + 2 * t);
}
// B fragment (16 x 8, k x n) with B[k][n] = m[n0 + n][k0 + k], m row-major with stride ld.
__device__ __forceinline__ void frag_b(uint32_t& b0, uint32_t& b1, const uint16_t* m, int ld, int n0, int k0, int g,
                                       int t) {
  b0 = ld32(m + (n0 + g) * ld + k0 + 2 * t);
  b1 = ld32(m + (n0 + g) * ld + k0 + 8 + 2 * t);
}

// Rows [r0, r0 + R) of a [S, D] plane into shared memory, zeros past S and past D (cols < DP):
// dst[r][LD] row-major, or with Tr transposed, dst[c][LD] (column c of the rows).
// vec: D % 8 == 0 and the plane 16-byte aligned, so rows move in 16-byte pieces.
template <int DP, int LD, int R, bool Tr = false>
__device__ void load_rows(const uint16_t* __restrict__ plane, int r0, int S, int D, bool vec, uint16_t* dst) {
  if (vec) {
    constexpr int CH = DP / 8;
    for (int idx = threadIdx.x; idx < R * CH; idx += kThreads) {
      const int r = idx / CH, c = (idx - r * CH) * 8;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (r0 + r < S && c < D) v = *reinterpret_cast<const uint4*>(plane + int64_t(r0 + r) * D + c);
      if constexpr (Tr) {
        const uint16_t* e = reinterpret_cast<const uint16_t*>(&v);
#pragma unroll
        for (int i = 0; i < 8; ++i) dst[(c + i) * LD + r] = e[i];
      } else {
        *reinterpret_cast<uint4*>(dst + r * LD + c) = v;
      }
    }
  } else {
    for (int idx = threadIdx.x; idx < R * DP; idx += kThreads) {
      const int r = idx / DP, c = idx - r * DP;
      dst[Tr ? c * LD + r : r * LD + c] = (r0 + r < S && c < D) ? plane[int64_t(r0 + r) * D + c] : uint16_t(0);
    }
  }
}

// Row max / sum over the 4 threads (t = 0..3) that share a fragment row.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(kFull, x, 1));
  return fmaxf(x, __shfl_xor_sync(kFull, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(kFull, x, 1);
  return x + __shfl_xor_sync(kFull, x, 2);
}

// Stores a warp's 16 x DP fp32 accumulator (times `mul`) as rows row0 / row0 + 8 of `dst`.
template <class T, int NT>
__device__ void store_acc(const float (&acc)[NT][4], T* dst, int64_t off, int row0, int S, int D, int t,
                          float mul0, float mul1) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = row0 + (e >> 1) * 8, c = nt * 8 + 2 * t + (e & 1);
      if (r < S && c < D) cu::st(dst, off + int64_t(r) * D + c, acc[nt][e] * ((e >> 1) ? mul1 : mul0));
    }
}

// ---- forward ------------------------------------------------------------------------------
// Block: 64 query rows of one (batch, head); key tiles of 64 through shared memory.
template <class T, int DP>
__global__ void __launch_bounds__(kThreads)
    fwd_kernel(const uint16_t* __restrict__ q, const uint16_t* __restrict__ k, const uint16_t* __restrict__ v,
               T* __restrict__ out, float* __restrict__ lse, int heads, int kv_heads, int S, int D, float scale_log2,
               bool causal, bool vec) {
  constexpr int BQ = 64, BK = 64, LD = DP + 8, LDT = BK + 8, KB = DP / 16, NT = DP / 8, NS = BK / 8;
  extern __shared__ __align__(16) uint16_t smem[];
  uint16_t* Qs = smem;          // [BQ][LD]
  uint16_t* Ks = Qs + BQ * LD;  // [BK][LD]
  uint16_t* Vt = Ks + BK * LD;  // [DP][LDT]  V transposed
  const int h = blockIdx.y, n = blockIdx.z, gkv = h / (heads / kv_heads);
  const int q0 = blockIdx.x * BQ;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t q_off = (int64_t(n) * heads + h) * S * D, kv_off = (int64_t(n) * kv_heads + gkv) * S * D;
  const int row0 = q0 + warp * 16 + g;  // this thread's rows: row0 and row0 + 8

  load_rows<DP, LD, BQ>(q + q_off, q0, S, D, vec, Qs);
  float o[NT][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.f;
  const int k_end = causal ? min(S, q0 + BQ) : S;
  for (int k0 = 0; k0 < k_end; k0 += BK) {
    __syncthreads();  // previous tiles consumed (first pass: nothing)
    load_rows<DP, LD, BK>(k + kv_off, k0, S, D, vec, Ks);
    load_rows<DP, LDT, BK, true>(v + kv_off, k0, S, D, vec, Vt);
    __syncthreads();
    float s[NS][4];
#pragma unroll
    for (int nt = 0; nt < NS; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
    for (int kb = 0; kb < KB; ++kb) {
      uint32_t qa[4];
      frag_a(qa, Qs, LD, warp * 16, kb * 16, g, t);
#pragma unroll
      for (int nt = 0; nt < NS; ++nt) {
        uint32_t b0, b1;
        frag_b(b0, b1, Ks, LD, nt * 8, kb * 16, g, t);
        Mma<T>::run(s[nt], qa, b0, b1);
      }
    }
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < NS; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = row0 + (e >> 1) * 8, kj = k0 + nt * 8 + 2 * t + (e & 1);
        const float x = (kj < S && (!causal || kj <= r)) ? s[nt][e] * scale_log2 : -INFINITY;
        s[nt][e] = x;
        mx[e >> 1] = fmaxf(mx[e >> 1], x);
      }
    float mu[2], alpha[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float m_new = fmaxf(m[i], quad_max(mx[i]));
      mu[i] = m_new == -INFINITY ? 0.f : m_new;  // no unmasked key yet: every p is 0
      alpha[i] = exp2f(m[i] - mu[i]);            // m = -inf: 0 (l and o are 0)
      m[i] = m_new;
      l[i] *= alpha[i];
    }
#pragma unroll
    for (int nt = 0; nt < NS; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = exp2f(s[nt][e] - mu[e >> 1]);
        s[nt][e] = p;
        l[e >> 1] += p;  // this thread's share of the row sum; combined at the end
      }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      o[nt][0] *= alpha[0];
      o[nt][1] *= alpha[0];
      o[nt][2] *= alpha[1];
      o[nt][3] *= alpha[1];
    }
#pragma unroll
    for (int kb = 0; kb < BK / 16; ++kb) {
      uint32_t pa[4];
      Mma<T>::a_from_c(pa, s, kb);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        uint32_t b0, b1;
        frag_b(b0, b1, Vt, LDT, nt * 8, kb * 16, g, t);
        Mma<T>::run(o[nt], pa, b0, b1);
      }
    }
  }
  float inv[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    l[i] = quad_sum(l[i]);
    inv[i] = l[i] > 0.f ? 1.f / l[i] : 0.f;
  }
  store_acc<T, NT>(o, out, q_off, row0, S, D, t, inv[0], inv[1]);
  if (t == 0 && lse != nullptr)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int r = row0 + 8 * i;
      if (r < S) lse[(int64_t(n) * heads + h) * S + r] = l[i] > 0.f ? (m[i] + log2f(l[i])) * kLn2 : -INFINITY;
    }
}

// ---- backward: dQ (64 query rows resident, 32-key tiles streamed) --------------------------
template <class T, int DP>
__global__ void __launch_bounds__(kThreads)
    bwd_dq_kernel(const uint16_t* __restrict__ q, const uint16_t* __restrict__ k, const uint16_t* __restrict__ v,
                  const uint16_t* __restrict__ dout, const float* __restrict__ lse, const float* __restrict__ Dvec,
                  T* __restrict__ dq, int heads, int kv_heads, int S, int D, float scale_log2, float scale, bool causal,
                  bool vec) {
  constexpr int BQ = 64, BK = 32, LD = DP + 8, LDT = BK + 8, KB = DP / 16, NT = DP / 8, NS = BK / 8;
  extern __shared__ __align__(16) uint16_t smem[];
  uint16_t* Qs = smem;            // [BQ][LD]
  uint16_t* dOs = Qs + BQ * LD;   // [BQ][LD]
  uint16_t* Ks = dOs + BQ * LD;   // [BK][LD]
  uint16_t* Vs = Ks + BK * LD;    // [BK][LD]
  uint16_t* Kt = Vs + BK * LD;    // [DP][LDT]  K transposed
  const int h = blockIdx.y, n = blockIdx.z, gkv = h / (heads / kv_heads);
  const int q0 = blockIdx.x * BQ;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t q_off = (int64_t(n) * heads + h) * S * D, kv_off = (int64_t(n) * kv_heads + gkv) * S * D;
  const int64_t row_off = (int64_t(n) * heads + h) * S;
  const int row0 = q0 + warp * 16 + g;

  load_rows<DP, LD, BQ>(q + q_off, q0, S, D, vec, Qs);
  load_rows<DP, LD, BQ>(dout + q_off, q0, S, D, vec, dOs);
  float lse2[2], Dr[2], acc[NT][4];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = row0 + 8 * i;
    lse2[i] = r < S ? lse[row_off + r] * kLog2e : 0.f;
    Dr[i] = r < S ? Dvec[row_off + r] : 0.f;
  }
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
  const int k_end = causal ? min(S, q0 + BQ) : S;
  for (int k0 = 0; k0 < k_end; k0 += BK) {
    __syncthreads();
    load_rows<DP, LD, BK>(k + kv_off, k0, S, D, vec, Ks);
    load_rows<DP, LD, BK>(v + kv_off, k0, S, D, vec, Vs);
    load_rows<DP, LDT, BK, true>(k + kv_off, k0, S, D, vec, Kt);
    __syncthreads();
    float s[NS][4], dp[NS][4];
#pragma unroll
    for (int nt = 0; nt < NS; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = dp[nt][e] = 0.f;
#pragma unroll
    for (int kb = 0; kb < KB; ++kb) {
      uint32_t qa[4], da[4];
      frag_a(qa, Qs, LD, warp * 16, kb * 16, g, t);
      frag_a(da, dOs, LD, warp * 16, kb * 16, g, t);
#pragma unroll
      for (int nt = 0; nt < NS; ++nt) {
        uint32_t b0, b1;
        frag_b(b0, b1, Ks, LD, nt * 8, kb * 16, g, t);
        Mma<T>::run(s[nt], qa, b0, b1);  // S = Q K^T
        frag_b(b0, b1, Vs, LD, nt * 8, kb * 16, g, t);
        Mma<T>::run(dp[nt], da, b0, b1);  // dP = dO V^T
      }
    }
#pragma unroll
    for (int nt = 0; nt < NS; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = row0 + (e >> 1) * 8, kj = k0 + nt * 8 + 2 * t + (e & 1);
        const bool ok = kj < S && (!causal || kj <= r);
        const float p = ok ? exp2f(s[nt][e] * scale_log2 - lse2[e >> 1]) : 0.f;
        s[nt][e] = p * (dp[nt][e] - Dr[e >> 1]);  // dS
      }
#pragma unroll
    for (int kb = 0; kb < BK / 16; ++kb) {
      uint32_t da[4];
      Mma<T>::a_from_c(da, s, kb);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        uint32_t b0, b1;
        frag_b(b0, b1, Kt, LDT, nt * 8, kb * 16, g, t);
        Mma<T>::run(acc[nt], da, b0, b1);  // dQ += dS K
      }
    }
  }
  store_acc<T, NT>(acc, dq, q_off, row0, S, D, t, scale, scale);
}

// ---- backward: dK, dV (64 keys resident, 32-query tiles of every q head of the group) ----
template <class T, int DP>
__global__ void __launch_bounds__(kThreads)
    bwd_dkdv_kernel(const uint16_t* __restrict__ q, const uint16_t* __restrict__ k, const uint16_t* __restrict__ v,
                    const uint16_t* __restrict__ dout, const float* __restrict__ lse, const float* __restrict__ Dvec,
                    T* __restrict__ dk, T* __restrict__ dv, int heads, int kv_heads, int S, int D, float scale_log2,
                    float scale, bool causal, bool vec) {
  constexpr int BKV = 64, BQ = 32, LD = DP + 8, LDT = BQ + 8, KB = DP / 16, NT = DP / 8, NS = BQ / 8;
  extern __shared__ __align__(16) uint16_t smem[];
  uint16_t* Ks = smem;            // [BKV][LD]
  uint16_t* Vs = Ks + BKV * LD;   // [BKV][LD]
  uint16_t* Qs = Vs + BKV * LD;   // [BQ][LD]
  uint16_t* dOs = Qs + BQ * LD;   // [BQ][LD]
  uint16_t* Qt = dOs + BQ * LD;   // [DP][LDT]
  uint16_t* dOt = Qt + DP * LDT;  // [DP][LDT]
  float* lse_s = reinterpret_cast<float*>(dOt + DP * LDT);  // [BQ], base-2 units
  float* D_s = lse_s + BQ;                                  // [BQ]
  const int gkv = blockIdx.y, n = blockIdx.z, group = heads / kv_heads;
  const int k0 = blockIdx.x * BKV;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t kv_off = (int64_t(n) * kv_heads + gkv) * S * D;
  const int key0 = k0 + warp * 16 + g;  // this thread's keys: key0 and key0 + 8

  load_rows<DP, LD, BKV>(k + kv_off, k0, S, D, vec, Ks);
  load_rows<DP, LD, BKV>(v + kv_off, k0, S, D, vec, Vs);
  float dk_acc[NT][4], dv_acc[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk_acc[nt][e] = dv_acc[nt][e] = 0.f;
  // Causal: queries before k0 see none of this block's keys.
  const int q_begin = causal ? (k0 / BQ) * BQ : 0;
  for (int hh = 0; hh < group; ++hh) {
    const int h = gkv * group + hh;
    const int64_t q_off = (int64_t(n) * heads + h) * S * D;
    const int64_t row_off = (int64_t(n) * heads + h) * S;
    for (int q0 = q_begin; q0 < S; q0 += BQ) {
      __syncthreads();  // previous tiles consumed (first pass: K and V complete after the next one)
      load_rows<DP, LD, BQ>(q + q_off, q0, S, D, vec, Qs);
      load_rows<DP, LD, BQ>(dout + q_off, q0, S, D, vec, dOs);
      load_rows<DP, LDT, BQ, true>(q + q_off, q0, S, D, vec, Qt);
      load_rows<DP, LDT, BQ, true>(dout + q_off, q0, S, D, vec, dOt);
      if (threadIdx.x < BQ) {
        const int qi = q0 + threadIdx.x;
        lse_s[threadIdx.x] = qi < S ? lse[row_off + qi] * kLog2e : 0.f;
        D_s[threadIdx.x] = qi < S ? Dvec[row_off + qi] : 0.f;
      }
      __syncthreads();
      float st[NS][4], dpt[NS][4];  // S^T and dP^T: rows = keys, cols = queries
#pragma unroll
      for (int nt = 0; nt < NS; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) st[nt][e] = dpt[nt][e] = 0.f;
#pragma unroll
      for (int kb = 0; kb < KB; ++kb) {
        uint32_t ka[4], va[4];
        frag_a(ka, Ks, LD, warp * 16, kb * 16, g, t);
        frag_a(va, Vs, LD, warp * 16, kb * 16, g, t);
#pragma unroll
        for (int nt = 0; nt < NS; ++nt) {
          uint32_t b0, b1;
          frag_b(b0, b1, Qs, LD, nt * 8, kb * 16, g, t);
          Mma<T>::run(st[nt], ka, b0, b1);  // S^T = K Q^T
          frag_b(b0, b1, dOs, LD, nt * 8, kb * 16, g, t);
          Mma<T>::run(dpt[nt], va, b0, b1);  // dP^T = V dO^T
        }
      }
#pragma unroll
      for (int nt = 0; nt < NS; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key0 + (e >> 1) * 8, c = nt * 8 + 2 * t + (e & 1), qi = q0 + c;
          const bool ok = qi < S && key < S && (!causal || key <= qi);
          const float p = ok ? exp2f(st[nt][e] * scale_log2 - lse_s[c]) : 0.f;
          st[nt][e] = p;
          dpt[nt][e] = p * (dpt[nt][e] - D_s[c]);  // dS^T
        }
#pragma unroll
      for (int kb = 0; kb < BQ / 16; ++kb) {
        uint32_t pa[4], sa[4];
        Mma<T>::a_from_c(pa, st, kb);
        Mma<T>::a_from_c(sa, dpt, kb);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          uint32_t b0, b1;
          frag_b(b0, b1, dOt, LDT, nt * 8, kb * 16, g, t);
          Mma<T>::run(dv_acc[nt], pa, b0, b1);  // dV += P^T dO
          frag_b(b0, b1, Qt, LDT, nt * 8, kb * 16, g, t);
          Mma<T>::run(dk_acc[nt], sa, b0, b1);  // dK += dS^T Q
        }
      }
    }
  }
  store_acc<T, NT>(dk_acc, dk, kv_off, key0, S, D, t, scale, scale);
  store_acc<T, NT>(dv_acc, dv, kv_off, key0, S, D, t, 1.f, 1.f);
}

// ---- launch helpers ------------------------------------------------------------------------
template <class F>
void dispatch_dp(int64_t head_dim, F&& f) {
  if (head_dim <= 32) f(std::integral_constant<int, 32>{});
  else if (head_dim <= 64) f(std::integral_constant<int, 64>{});
  else if (head_dim <= 96) f(std::integral_constant<int, 96>{});
  else f(std::integral_constant<int, 128>{});
}

template <class F>
void dispatch_16(Dtype d, F&& f) {
  if (d == Dtype::bf16) f(static_cast<__nv_bfloat16*>(nullptr));
  else f(static_cast<__half*>(nullptr));
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

const uint16_t* raw(const void* p) { return static_cast<const uint16_t*>(p); }

}  // namespace

bool eligible(Dtype dtype, int64_t head_dim) {
  if (!(dtype == Dtype::bf16 || dtype == Dtype::f16) || head_dim < 1 || head_dim > 128) return false;
  // mma.m16n8k16 with bf16/fp16 operands needs compute capability 8.0 (PTX ISA).
  int dev = 0, major = 0;
  PARALAB_CUDA_CHECK(cudaGetDevice(&dev));
  PARALAB_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  return major >= 8;
}

void forward(const AttentionFwdArgs& a, float scale, cudaStream_t stream) {
  const int S = int(a.seq), D = int(a.head_dim);
  const bool vec = D % 8 == 0 && aligned16(a.q) && aligned16(a.k) && aligned16(a.v);
  const dim3 grid(unsigned((S + 63) / 64), unsigned(a.heads), unsigned(a.batch));
  dispatch_16(a.dtype, [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    dispatch_dp(a.head_dim, [&](auto dp) {
      constexpr int DP = decltype(dp)::value;
      const size_t smem = 2 * size_t(128 * (DP + 8) + DP * (64 + 8));
      cu::set_smem(fwd_kernel<T, DP>, smem);
      fwd_kernel<T, DP><<<grid, kThreads, smem, stream>>>(raw(a.q), raw(a.k), raw(a.v), static_cast<T*>(a.out), a.lse,
                                                          int(a.heads), int(a.kv_heads), S, D, scale * kLog2e,
                                                          a.causal, vec);
      PARALAB_CUDA_CHECK_LAUNCH();
    });
  });
}

void backward(const AttentionBwdArgs& a, float scale, const float* Dvec, cudaStream_t stream) {
  const int S = int(a.seq), D = int(a.head_dim);
  const bool vec = D % 8 == 0 && aligned16(a.q) && aligned16(a.k) && aligned16(a.v) && aligned16(a.dout);
  const unsigned tiles = unsigned((S + 63) / 64);
  dispatch_16(a.dtype, [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    dispatch_dp(a.head_dim, [&](auto dp) {
      constexpr int DP = decltype(dp)::value;
      const size_t smem_dq = 2 * size_t((2 * 64 + 2 * 32) * (DP + 8) + DP * (32 + 8));
      cu::set_smem(bwd_dq_kernel<T, DP>, smem_dq);
      bwd_dq_kernel<T, DP><<<dim3(tiles, unsigned(a.heads), unsigned(a.batch)), kThreads, smem_dq, stream>>>(
          raw(a.q), raw(a.k), raw(a.v), raw(a.dout), a.lse, Dvec, static_cast<T*>(a.dq), int(a.heads),
          int(a.kv_heads), S, D, scale * kLog2e, scale, a.causal, vec);
      PARALAB_CUDA_CHECK_LAUNCH();
      const size_t smem_kv = 2 * size_t((2 * 64 + 2 * 32) * (DP + 8) + 2 * DP * (32 + 8)) + 2 * 32 * sizeof(float);
      cu::set_smem(bwd_dkdv_kernel<T, DP>, smem_kv);
      bwd_dkdv_kernel<T, DP><<<dim3(tiles, unsigned(a.kv_heads), unsigned(a.batch)), kThreads, smem_kv, stream>>>(
          raw(a.q), raw(a.k), raw(a.v), raw(a.dout), a.lse, Dvec, static_cast<T*>(a.dk), static_cast<T*>(a.dv),
          int(a.heads), int(a.kv_heads), S, D, scale * kLog2e, scale, a.causal, vec);
      PARALAB_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace paralab::kernels::attn_mma
