// kernels/cross_entropy.cu — CUDA vocab-parallel cross-entropy stages (cross_entropy.hpp).
// Stages (a) and (b): one block per row (local vocab is wide: 8k-64k). Stage (c): a single
// block walks all rows and reduces the mean in a fixed order (deterministic; rows are only
// tokens). Backward: elementwise over [rows, vocab] with cu::launch_ew2d.
#include "kernels/cross_entropy.hpp"
#include "kernels/cuda_utils.cuh"

namespace paralab::kernels {
namespace {

using cu::ld;
using cu::st;

template <class T>
__global__ void ce_max_kernel(const T* x, float* row_max, int64_t rows, int64_t vocab) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * vocab;
    float m = -INFINITY;
    for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) m = fmaxf(m, ld(xr, v));
    m = cu::block_max(m, scratch);
    if (threadIdx.x == 0) row_max[r] = m;
  }
}

template <class T>
__global__ void ce_sumexp_kernel(const T* x, const int32_t* targets, const float* row_max,
                                 float* sum_exp, float* target_logit, int64_t rows,
                                 int64_t vocab, int64_t vocab_start) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * vocab;
    const float m = row_max[r];
    float s = 0.f;
    for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) s += expf(ld(xr, v) - m);
    s = cu::block_sum(s, scratch);
    if (threadIdx.x == 0) {
      sum_exp[r] = s;
      const int64_t t = int64_t(targets[r]) - vocab_start;
      target_logit[r] = (t >= 0 && t < vocab) ? ld(xr, t) : 0.f;
    }
  }
}

__global__ void ce_loss_kernel(const float* row_max, const float* sum_exp,
                               const float* target_logit, float* loss, float* mean_loss,
                               int64_t rows) {
  __shared__ float scratch[32];
  float acc = 0.f;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    const float l = logf(sum_exp[r]) + row_max[r] - target_logit[r];
    if (loss != nullptr) loss[r] = l;
    acc += l;
  }
  acc = cu::block_sum(acc, scratch);
  if (threadIdx.x == 0 && mean_loss != nullptr) *mean_loss = acc / float(rows);
}

template <class T>
struct CeBwd {
  const T* x;
  const int32_t* targets;
  const float* row_max;
  const float* sum_exp;
  const float* dloss;
  float dloss_scale;
  T* dx;
  int64_t vocab;
  int64_t vocab_start;
  struct State { float p, g; bool hit; };
  __device__ void load(int64_t r, int64_t v, State& s) const {
    s.p = expf(ld(x, r * vocab + v) - row_max[r]) / sum_exp[r];
    s.g = dloss_scale * (dloss != nullptr ? dloss[r] : 1.f);
    s.hit = int64_t(targets[r]) - vocab_start == v;
  }
  __device__ void store(int64_t r, int64_t v, const State& s) const {
    st(dx, r * vocab + v, (s.p - (s.hit ? 1.f : 0.f)) * s.g);
  }
};

}  // namespace

void ce_local_max_cuda(const CeMaxArgs& a, cudaStream_t stream) {
  ce_local_max_check(a);
  cu::dispatch_float(a.dtype, "ce_local_max", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    ce_max_kernel<T><<<cu::grid_for(a.rows, 1), cu::row_block(a.vocab, 8), 0, stream>>>(
        static_cast<const T*>(a.logits), a.row_max, a.rows, a.vocab);
    PARALAB_CUDA_CHECK_LAUNCH();
  });
}

void ce_local_sumexp_cuda(const CeSumExpArgs& a, cudaStream_t stream) {
  ce_local_sumexp_check(a);
  cu::dispatch_float(a.dtype, "ce_local_sumexp", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    ce_sumexp_kernel<T><<<cu::grid_for(a.rows, 1), cu::row_block(a.vocab, 8), 0, stream>>>(
        static_cast<const T*>(a.logits), a.targets, a.row_max, a.sum_exp, a.target_logit, a.rows,
        a.vocab, a.vocab_start);
    PARALAB_CUDA_CHECK_LAUNCH();
  });
}

void ce_loss_cuda(const CeLossArgs& a, cudaStream_t stream) {
  ce_loss_check(a);
  ce_loss_kernel<<<1, 1024, 0, stream>>>(a.row_max, a.sum_exp, a.target_logit, a.loss,
                                         a.mean_loss, a.rows);
  PARALAB_CUDA_CHECK_LAUNCH();
}

void ce_bwd_cuda(const CeBwdArgs& a, cudaStream_t stream) {
  ce_bwd_check(a);
  cu::dispatch_float(a.dtype, "ce_bwd", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    cu::launch_ew2d(CeBwd<T>{static_cast<const T*>(a.logits), a.targets, a.row_max, a.sum_exp,
                             a.dloss, a.dloss_scale, static_cast<T*>(a.dlogits), a.vocab,
                             a.vocab_start},
                    a.rows, a.vocab, stream);
  });
}

void cross_entropy_fwd_cuda(const CrossEntropyArgs& a, cudaStream_t stream) {
  cross_entropy_fwd_check(a);
  cu::StreamScratch tgt(sizeof(float) * size_t(a.rows), stream);  // target logits [rows]
  ce_local_max_cuda(CeMaxArgs{a.logits, a.row_max, a.rows, a.vocab, a.dtype}, stream);
  ce_local_sumexp_cuda(CeSumExpArgs{a.logits, a.targets, a.row_max, a.sum_exp, tgt.f(), a.rows,
                                    a.vocab, 0, a.dtype},
                       stream);
  ce_loss_cuda(CeLossArgs{a.row_max, a.sum_exp, tgt.f(), a.loss, a.mean_loss, a.rows}, stream);
  tgt.release();
}

}  // namespace paralab::kernels
