// paralab exec/cuda — the backend's own kernels (device_ops.hpp). Conventions as kernels/:
// fp32 compute, int64 indices, grid-stride loops, conversions of kernels/dtype.hpp (so stored
// values round exactly as on the CPU backend).
#include "exec/cuda/device_ops.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "exec/cuda/device_elem.cuh"
#include "exec/fill_math.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/cuda_utils.cuh"
#include "kernels/dtype.hpp"
#include "kernels/loss_scale.hpp"

namespace paralab::exec::cuda::dev {

namespace {

namespace k = paralab::kernels;

using elem::load;
using elem::store;

constexpr int kThreads = 256;

unsigned blocks(int64_t work) { return k::cu::grid_for(work, kThreads, int64_t(1) << 16); }

__global__ void copy2d_kernel(const void* src, T st, int64_t sld, void* dst, T dt, int64_t dld, int64_t rows,
                              int64_t cols, bool acc) {
  const int64_t n = rows * cols, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const int64_t r = e / cols, c = e % cols;
    const float v = load(src, st, r * sld + c);
    const int64_t o = r * dld + c;
    store(dst, dt, o, acc ? load(dst, dt, o) + v : v);
  }
}

// Packed index e = ((b * H + h) * S + i) * D + c  <->  row (i * B + b), column col0 + h*hs + c.
__device__ __forceinline__ int64_t head_offset(int64_t e, int64_t B, int64_t H, int64_t S, int64_t D, int64_t ld,
                                               int64_t col0, int64_t hs) {
  const int64_t c = e % D;
  int64_t q = e / D;
  const int64_t i = q % S;
  q /= S;
  const int64_t h = q % H, b = q / H;
  return (i * B + b) * ld + col0 + h * hs + c;
}

__global__ void pack_kernel(const void* src, T st, int64_t ld, int64_t col0, int64_t hs, void* dst, T dt, int64_t B,
                            int64_t H, int64_t S, int64_t D) {
  const int64_t n = B * H * S * D, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride)
    store(dst, dt, e, load(src, st, head_offset(e, B, H, S, D, ld, col0, hs)));
}

__global__ void unpack_kernel(const void* src, T st, void* dst, T dt, int64_t ld, int64_t col0, int64_t hs, int64_t B,
                              int64_t H, int64_t S, int64_t D, bool acc) {
  const int64_t n = B * H * S * D, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const int64_t o = head_offset(e, B, H, S, D, ld, col0, hs);
    const float v = load(src, st, e);
    store(dst, dt, o, acc ? load(dst, dt, o) + v : v);
  }
}

__global__ void fill_kernel(void* p, T t, int64_t n, int kind, uint64_t key, int64_t off, int64_t vocab) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    if (kind == 4) {
      static_cast<int32_t*>(p)[i] = fillmath::token_id(key, off + i, vocab);
    } else if (kind == 3) {
      store(p, t, i, __int_as_float(0x7fc00000));
    } else {
      store(p, t, i, fillmath::fill_value(kind, key, off + i));
    }
  }
}

__global__ void param_kernel(void* p, T t, int64_t n, fillmath::ParamGeo geo, int64_t local0) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t local = local0 + i;
    store(p, t, i, fillmath::param_value(geo, local / geo.cols, local % geo.cols));
  }
}

__global__ void constant_kernel(void* p, T t, int64_t n, float v) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) store(p, t, i, v);
}

__global__ void bias_rows_kernel(void* c, T ct, int64_t rows, int64_t cols, const void* bias, T bt) {
  const int64_t n = rows * cols, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride)
    store(c, ct, e, load(c, ct, e) + load(bias, bt, e % cols));
}

__global__ void positions_kernel(void* out, T ot, const void* pos, T pt, int64_t rows, int64_t cols, int64_t batch,
                                 int64_t pos0) {
  const int64_t n = rows * cols, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const int64_t r = e / cols, c = e % cols;
    store(out, ot, e, load(out, ot, e) + load(pos, pt, (r / batch + pos0) * cols + c));
  }
}

__global__ void position_grad_kernel(void* dpos, T pt, const void* dout, T ot, int64_t seq, int64_t cols,
                                     int64_t batch, int64_t pos0) {
  const int64_t n = seq * cols, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const int64_t i = e / cols, c = e % cols;
    float s = 0.f;
    for (int64_t b = 0; b < batch; ++b) s += load(dout, ot, (i * batch + b) * cols + c);
    const int64_t o = (i + pos0) * cols + c;
    store(dpos, pt, o, load(dpos, pt, o) + s);
  }
}

// One block per row.
__global__ void xent_sum_kernel(const void* logits, T t, const float* row_max, const int32_t* labels,
                                int64_t vstart, float* ex, float* sums, int64_t vocab) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const float mx = row_max[r];
  float s = 0.f;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
    const float e = expf(load(logits, t, r * vocab + v) - mx);
    ex[r * vocab + v] = e;
    s += e;
  }
  s = k::cu::block_sum(s, scratch);
  if (threadIdx.x == 0) {
    const int64_t local = int64_t(labels[r]) - vstart;
    sums[2 * r] = s;
    sums[2 * r + 1] = local >= 0 && local < vocab ? load(logits, t, r * vocab + local) : 0.f;
  }
}

__global__ void xent_bwd_kernel(const float* ex, const float* sums, const int32_t* labels, int64_t vstart, float g,
                                const float* scale, void* d, T t, int64_t rows, int64_t vocab) {
  const int64_t n = rows * vocab, stride = int64_t(gridDim.x) * blockDim.x;
  if (scale) g *= scale[0];
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const int64_t r = e / vocab, v = e % vocab;
    float x = ex[e] * (1.0f / sums[2 * r]);
    if (int64_t(labels[r]) - vstart == v) x -= 1.0f;
    store(d, t, e, x * g);
  }
}

__global__ void flag_max_kernel(float* flag, const int32_t* found) {
  flag[0] = fmaxf(flag[0], static_cast<float>(found[0]));
}

__global__ void optimizer_scalars_kernel(const float* found_flag, const float* norm_sq, const float* loss_scale,
                                         double clip, int32_t* found_out, float* divisor) {
  const float S = loss_scale ? loss_scale[0] : 1.0f;
  found_out[0] = found_flag && found_flag[0] > 0.f ? 1 : 0;
  double coef = 1.0;
  if (norm_sq) {
    double norm = sqrt(static_cast<double>(norm_sq[0]));
    if (loss_scale) norm /= S;
    coef = fmin(1.0, clip / (norm + 1e-6));
  }
  divisor[0] = static_cast<float>(static_cast<double>(S) / coef);
}

__global__ void scaler_found_kernel(k::LossScaleState* s, const float* flag) { s->found_inf = flag[0] > 0.f ? 1 : 0; }

__global__ void accumulate_sum_kernel(double* acc, const float* x, int64_t n) {
  __shared__ double part[kThreads];
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) acc[0] += part[0];
}

__global__ void merge_kernel(float* prev, const float* out, float* lse, const float* lse_blk, int64_t rows, int64_t d) {
  const int64_t n = rows * d, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const int64_t r = e / d;
    const float l0 = lse[r], l1 = lse_blk[r];
    const float mx = fmaxf(l0, l1);
    const float ln = mx + logf(expf(l0 - mx) + expf(l1 - mx));
    prev[e] = expf(l0 - ln) * prev[e] + expf(l1 - ln) * out[e];
  }
}

// lse is updated after every element of the row used the old value: a second pass.
__global__ void merge_lse_kernel(float* lse, const float* lse_blk, int64_t rows) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += stride) {
    const float l0 = lse[r], l1 = lse_blk[r];
    const float mx = fmaxf(l0, l1);
    lse[r] = mx + logf(expf(l0 - mx) + expf(l1 - mx));
  }
}

}  // namespace

void copy2d(const void* src, T src_t, int64_t src_ld, void* dst, T dst_t, int64_t dst_ld, int64_t rows, int64_t cols,
            bool accumulate, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  copy2d_kernel<<<blocks(rows * cols), kThreads, 0, stream>>>(src, src_t, src_ld, dst, dst_t, dst_ld, rows, cols, accumulate);
  PARALAB_CUDA_CHECK_LAUNCH();
}

void pack_heads(const void* src, T src_t, int64_t ld, int64_t col0, int64_t hstride, void* dst, T dst_t, int64_t batch,
                int64_t heads, int64_t seq, int64_t d, cudaStream_t stream) {
  const int64_t n = batch * heads * seq * d;
  if (n <= 0) return;
  pack_kernel<<<blocks(n), kThreads, 0, stream>>>(src, src_t, ld, col0, hstride, dst, dst_t, batch, heads, seq, d);
  PARALAB_CUDA_CHECK_LAUNCH();
}

void unpack_heads(const void* src, T src_t, void* dst, T dst_t, int64_t ld, int64_t col0, int64_t hstride, int64_t batch,
                  int64_t heads, int64_t seq, int64_t d, bool accumulate, cudaStream_t stream) {
  const int64_t n = batch * heads * seq * d;
  if (n <= 0) return;
  unpack_kernel<<<blocks(n), kThreads, 0, stream>>>(src, src_t, dst, dst_t, ld, col0, hstride, batch, heads, seq, d,
                                                    accumulate);
  PARALAB_CUDA_CHECK_LAUNCH();
}

void fill(void* p, T t, int64_t n, int kind, uint64_t key, int64_t global_offset, int64_t vocab, cudaStream_t stream) {
  if (n <= 0) return;
  fill_kernel<<<blocks(n), kThreads, 0, stream>>>(p, t, n, kind, key, global_offset, vocab);
  PARALAB_CUDA_CHECK_LAUNCH();
}

void fill_params(void* p, T t, int64_t n, const fillmath::ParamGeo& geo, int64_t local0, cudaStream_t stream) {
  if (n <= 0) return;
  param_kernel<<<blocks(n), kThreads, 0, stream>>>(p, t, n, geo, local0);
  PARALAB_CUDA_CHECK_LAUNCH();
}

void fill_constant(void* p, T t, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return;
  constant_kernel<<<blocks(n), kThreads, 0, stream>>>(p, t, n, value);
  PARALAB_CUDA_CHECK_LAUNCH();
}

void add_bias_rows(void* c, T ct, int64_t rows, int64_t cols, const void* bias, T bt, cudaStream_t stream) {
  if (rows * cols <= 0) return;
  bias_rows_kernel<<<blocks(rows * cols), kThreads, 0, stream>>>(c, ct, rows, cols, bias, bt);
  PARALAB_CUDA_CHECK_LAUNCH();
}

void add_positions(void* out, T ot, const void* pos, T pt, int64_t rows, int64_t cols, int64_t batch, int64_t pos0,
                   cudaStream_t stream) {
  if (rows * cols <= 0) return;
  positions_kernel<<<blocks(rows * cols), kThreads, 0, stream>>>(out, ot, pos, pt, rows, cols, batch, pos0);
  PARALAB_CUDA_CHECK_LAUNCH();
}

void position_grad(void* dpos, T pt, const void* dout, T ot, int64_t rows, int64_t cols, int64_t batch, int64_t pos0,
                   cudaStream_t stream) {
  const int64_t seq = rows / batch;
  if (seq * cols <= 0) return;
  position_grad_kernel<<<blocks(seq * cols), kThreads, 0, stream>>>(dpos, pt, dout, ot, seq, cols, batch, pos0);
  PARALAB_CUDA_CHECK_LAUNCH();
}

void xent_sum(const void* logits, T t, const float* row_max, const int32_t* labels, int64_t vocab_start, float* ex,
              float* sums, int64_t rows, int64_t vocab, cudaStream_t stream) {
  if (rows <= 0) return;
  xent_sum_kernel<<<unsigned(rows), k::cu::row_block(vocab), 0, stream>>>(logits, t, row_max, labels, vocab_start, ex,
                                                                           sums, vocab);
  PARALAB_CUDA_CHECK_LAUNCH();
}

void xent_bwd(const float* ex, const float* sums, const int32_t* labels, int64_t vocab_start, float g, const float* scale,
              void* d, T t, int64_t rows, int64_t vocab, cudaStream_t stream) {
  if (rows * vocab <= 0) return;
  xent_bwd_kernel<<<blocks(rows * vocab), kThreads, 0, stream>>>(ex, sums, labels, vocab_start, g, scale, d, t, rows, vocab);
  PARALAB_CUDA_CHECK_LAUNCH();
}

void flag_max(float* flag, const int32_t* found, cudaStream_t stream) {
  flag_max_kernel<<<1, 1, 0, stream>>>(flag, found);
  PARALAB_CUDA_CHECK_LAUNCH();
}

void optimizer_scalars(const float* found_flag, const float* norm_sq, const float* loss_scale, double clip,
                       int32_t* found_out, float* divisor, cudaStream_t stream) {
  optimizer_scalars_kernel<<<1, 1, 0, stream>>>(found_flag, norm_sq, loss_scale, clip, found_out, divisor);
  PARALAB_CUDA_CHECK_LAUNCH();
}

void scaler_found(void* state, const float* flag, cudaStream_t stream) {
  scaler_found_kernel<<<1, 1, 0, stream>>>(static_cast<k::LossScaleState*>(state), flag);
  PARALAB_CUDA_CHECK_LAUNCH();
}

void accumulate_sum(double* acc, const float* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  accumulate_sum_kernel<<<1, kThreads, 0, stream>>>(acc, x, n);
  PARALAB_CUDA_CHECK_LAUNCH();
}

void merge_attention(float* prev, const float* out, float* lse, const float* lse_blk, int64_t rows, int64_t d,
                     cudaStream_t stream) {
  if (rows * d <= 0) return;
  merge_kernel<<<blocks(rows * d), kThreads, 0, stream>>>(prev, out, lse, lse_blk, rows, d);
  PARALAB_CUDA_CHECK_LAUNCH();
  merge_lse_kernel<<<blocks(rows), kThreads, 0, stream>>>(lse, lse_blk, rows);
  PARALAB_CUDA_CHECK_LAUNCH();
}

}  // namespace paralab::exec::cuda::dev
