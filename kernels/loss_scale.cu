// kernels/loss_scale.cu — CUDA overflow check, unscale and loss-scale update (algorithm and
// call order: loss_scale.hpp). The check keeps a per-thread flag and writes the shared flag
// once per warp that saw a non-finite value (a benign same-value write, no atomics needed).
#include "kernels/cuda_utils.cuh"
#include "kernels/loss_scale.hpp"

namespace paralab::kernels {
namespace {

using cu::ld;
using cu::st;

constexpr int kBlock = 256;

// Flags Inf/NaN in buf; if inv_scale_p is non-null also multiplies buf by 1/(*scale).
template <class T>
__global__ void __launch_bounds__(kBlock)
    overflow_kernel(T* buf, int64_t n, const float* scale_p, int32_t* found_inf) {
  const float inv = scale_p != nullptr ? 1.f / *scale_p : 1.f;
  bool bad = false;
  const int64_t stride = int64_t(gridDim.x) * kBlock;
  for (int64_t i = int64_t(blockIdx.x) * kBlock + threadIdx.x; i < n; i += stride) {
    const float v = ld(buf, i);
    bad |= !(v - v == 0.f);  // Inf - Inf and NaN - NaN are NaN
    if (scale_p != nullptr) st(buf, i, v * inv);
  }
  // Every lane reaches this vote (the loop above has no early exit).
  if (__any_sync(0xffffffffu, bad) && (threadIdx.x & 31) == 0 && found_inf != nullptr)
    *found_inf = 1;
}

__global__ void update_scale_kernel(LossScaleState* s, float growth, float backoff,
                                    int32_t interval) {
  const bool skipped = s->found_inf != 0;
  if (skipped) {
    s->scale *= backoff;
    s->growth_tracker = 0;
    s->skipped_steps += 1;
  } else {
    s->growth_tracker += 1;
    if (s->growth_tracker >= interval) {
      s->scale *= growth;
      s->growth_tracker = 0;
    }
  }
  s->last_step_skipped = skipped ? 1 : 0;
  s->found_inf = 0;
}

unsigned blocks_for(int64_t n) { return cu::grid_for(n, int64_t(kBlock) * 8, int64_t(132) * 32); }

}  // namespace

void check_overflow_cuda(const CheckOverflowArgs& a, cudaStream_t stream) {
  check_overflow_check(a);
  cu::dispatch_float(a.dtype, "check_overflow", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    // const_cast: with scale_p == nullptr the kernel never writes buf.
    overflow_kernel<T><<<blocks_for(a.n), kBlock, 0, stream>>>(
        const_cast<T*>(static_cast<const T*>(a.buf)), a.n, nullptr, a.found_inf);
    PARALAB_CUDA_CHECK_LAUNCH();
  });
}

void unscale_cuda(const UnscaleArgs& a, cudaStream_t stream) {
  unscale_check(a);
  cu::dispatch_float(a.dtype, "unscale", "dtype", [&](auto tag) {
    using T = cu::elem_t<decltype(tag)>;
    overflow_kernel<T><<<blocks_for(a.n), kBlock, 0, stream>>>(static_cast<T*>(a.buf), a.n,
                                                               a.scale, a.found_inf);
    PARALAB_CUDA_CHECK_LAUNCH();
  });
}

void update_scale_cuda(LossScaleState* state, const LossScaleConfig& cfg, cudaStream_t stream) {
  detail::check_ptr("update_scale", "state", state);
  loss_scale_config_check(cfg);
  update_scale_kernel<<<1, 1, 0, stream>>>(state, cfg.growth_factor, cfg.backoff_factor,
                                           cfg.growth_interval);
  PARALAB_CUDA_CHECK_LAUNCH();
}

}  // namespace paralab::kernels
