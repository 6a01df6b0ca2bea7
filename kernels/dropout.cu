// kernels/dropout.cu — CUDA dropout and bias-dropout-add (semantics: dropout.hpp, stream:
// rng.hpp). One kernel serves both forwards (plain dropout = one row, no bias, no residual).
//
// Threads own Philox counter blocks, not elements: thread j of row r computes block
// q0(r) + j once and applies its four words to the (up to four) elements of that block that
// fall in the row. A block straddling two rows is computed by one thread of each row, each
// using only its own words, so every element gets exactly the word the CPU twin gives it.
#include "kernels/cuda_utils.cuh"
#include "kernels/dropout.hpp"
#include "kernels/rng.hpp"

namespace paralab::kernels {
namespace {

using cu::ld;
using cu::st;

constexpr int kBlock = 256;

template <class T>
__global__ void __launch_bounds__(kBlock)
    dropout_add_fwd_kernel(const T* x, const T* bias, const T* residual, T* out, uint8_t* mask,
                           int64_t rows, int64_t cols, uint64_t threshold, float scale,
                           uint64_t seed, uint64_t offset) {
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const uint64_t g_begin = offset + uint64_t(r) * uint64_t(cols);  // stream positions
    const uint64_t g_end = g_begin + uint64_t(cols);
    const uint64_t q0 = g_begin >> 2;
    const uint64_t nq = ((g_end + 3) >> 2) - q0;  // counter blocks touching row r
    const int64_t row0 = r * cols;
    for (uint64_t j = uint64_t(blockIdx.x) * kBlock + threadIdx.x; j < nq;
         j += uint64_t(gridDim.x) * kBlock) {
      const uint64_t q = q0 + j;
      float v[4], res[4];
#pragma unroll
      for (int w = 0; w < 4; ++w) {  // loads first, then the Philox rounds overlap them
        const uint64_t g = 4 * q + w;
        v[w] = 0.f;
        res[w] = 0.f;
        if (g >= g_begin && g < g_end) {
          const int64_t c = int64_t(g - g_begin);
          v[w] = ld(x, row0 + c) + (bias != nullptr ? ld(bias, c) : 0.f);
          if (residual != nullptr) res[w] = ld(residual, row0 + c);
        }
      }
      const Philox4 b = dropout_block(seed, q);
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const uint64_t g = 4 * q + w;
        if (g >= g_begin && g < g_end) {
          const int64_t c = int64_t(g - g_begin);
          const bool keep = uint64_t(b.v[w]) >= threshold;
          st(out, row0 + c, res[w] + (keep ? v[w] * scale : 0.f));
          if (mask != nullptr) mask[row0 + c] = keep ? 1 : 0;
        }
      }
    }
  }
}

template <class T>
void launch_fwd(const T* x, const T* bias, const T* residual, T* out, uint8_t* mask,
                int64_t rows, int64_t cols, float p, uint64_t seed, uint64_t offset,
                cudaStream_t stream) {
  const dim3 grid(cu::grid_for(cols / 4 + 2, kBlock, int64_t(1) << 24),
                  unsigned(std::min<int64_t>(rows, 65535)));
  dropout_add_fwd_kernel<T><<<grid, kBlock, 0, stream>>>(x, bias, residual, out, mask, rows,
                                                         cols, dropout_threshold(p),
                                                         dropout_scale(p), seed, offset);
  PARALAB_CUDA_CHECK_LAUNCH();
}

// dx = dout * mask * scale (mask null: all kept).
template <class T>
struct DropoutBwd {
  const T* dout;
  const uint8_t* mask;
  T* dx;
  int64_t cols;
  float scale;
  struct State { float v; };
  __device__ void load(int64_t r, int64_t c, State& s) const {
    const int64_t i = r * cols + c;
    const bool keep = mask == nullptr || mask[i] != 0;
    s.v = keep ? ld(dout, i) * scale : 0.f;
  }
  __device__ void store(int64_t r, int64_t c, const State& s) const { st(dx, r * cols + c, s.v); }
};

template <class T>
struct DropoutBiasGrad {
  const T* dout;
  const uint8_t* mask;
  int64_t cols;
  float scale;
  __device__ void operator()(int64_t r, int64_t c, float& a0, float&) const {
    const int64_t i = r * cols + c;
    if (mask == nullptr || mask[i] != 0) a0 += ld(dout, i) * scale;
  }
};

}  // namespace

void dropout_fwd_cuda(const DropoutFwdArgs& a, cudaStream_t stream) {
  dropout_fwd_check(a);
  cu::dispatch_float(a.dtype, "dropout_fwd", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    launch_fwd<T>(static_cast<const T*>(a.x), nullptr, nullptr, static_cast<T*>(a.y), a.mask, 1,
                  a.n, a.p, a.seed, a.offset, stream);
  });
}

void dropout_bwd_cuda(const DropoutBwdArgs& a, cudaStream_t stream) {
  dropout_bwd_check(a);
  cu::dispatch_float(a.dtype, "dropout_bwd", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    cu::launch_ew2d(DropoutBwd<T>{static_cast<const T*>(a.dy), a.mask, static_cast<T*>(a.dx),
                                  a.n, dropout_scale(a.p)},
                    1, a.n, stream);
  });
}

void dropout_add_fwd_cuda(const DropoutAddFwdArgs& a, cudaStream_t stream) {
  dropout_add_fwd_check(a);
  cu::dispatch_float(a.dtype, "dropout_add_fwd", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    launch_fwd<T>(static_cast<const T*>(a.x), static_cast<const T*>(a.bias),
                  static_cast<const T*>(a.residual), static_cast<T*>(a.out), a.mask, a.rows,
                  a.cols, a.p, a.seed, a.offset, stream);
  });
}

void dropout_add_bwd_cuda(const DropoutAddBwdArgs& a, cudaStream_t stream) {
  dropout_add_bwd_check(a);
  cu::dispatch_float(a.dtype, "dropout_add_bwd", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    const T* dout = static_cast<const T*>(a.dout);
    const float s = dropout_scale(a.p);
    if (a.dbias != nullptr)  // before dx: dx may alias dout
      cu::col_reduce(DropoutBiasGrad<T>{dout, a.mask, a.cols, s}, a.rows, a.cols, a.dbias,
                     nullptr, a.accumulate, stream);
    cu::launch_ew2d(DropoutBwd<T>{dout, a.mask, static_cast<T*>(a.dx), a.cols, s}, a.rows,
                    a.cols, stream);
  });
}

}  // namespace paralab::kernels
