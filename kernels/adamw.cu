// kernels/adamw.cu — CUDA AdamW step (formulas and semantics: adamw.hpp). Elementwise and
// memory bound (fp32 master + m + v read and written, grad read, param written); the
// skip flag and loss scale are device scalars read by every thread (cached), so a skipped
// step costs one tiny read per thread and no host round trip.
#include <cmath>

#include "kernels/adamw.hpp"
#include "kernels/cuda_utils.cuh"

namespace paralab::kernels {
namespace {

using cu::ld;
using cu::st;

struct AdamConsts {
  float b1, b2, c1, c2, step_size, inv_sqrt_bc2, decay, eps, grad_scale;
};

template <class G, class P>
__global__ void adamw_kernel(float* master, float* m1, float* m2, const G* grad, P* param,
                             int64_t n, AdamConsts k, const float* loss_scale,
                             const int32_t* found_inf) {
  if (found_inf != nullptr && *found_inf != 0) return;
  const float mult = loss_scale != nullptr ? k.grad_scale / *loss_scale : k.grad_scale;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float g = ld(grad, i) * mult;
    const float m = k.b1 * m1[i] + k.c1 * g;
    const float v = k.b2 * m2[i] + k.c2 * g * g;
    m1[i] = m;
    m2[i] = v;
    const float th = master[i];
    const float nt = th - k.decay * th - k.step_size * m / (sqrtf(v) * k.inv_sqrt_bc2 + k.eps);
    master[i] = nt;
    if (param != nullptr) st(param, i, nt);
  }
}

}  // namespace

void adamw_step_cuda(const AdamWArgs& a, cudaStream_t stream) {
  adamw_check(a);
  const double bc1 = 1.0 - std::pow(double(a.beta1), double(a.step));
  const double bc2 = 1.0 - std::pow(double(a.beta2), double(a.step));
  const AdamConsts k{a.beta1,
                     a.beta2,
                     1.f - a.beta1,
                     1.f - a.beta2,
                     float(double(a.lr) / bc1),
                     float(1.0 / std::sqrt(bc2)),
                     a.lr * a.weight_decay,
                     a.eps,
                     a.grad_scale};
  // param may be absent: dispatch it as f32 then (the pointer stays null).
  const Dtype pd = a.param != nullptr ? a.param_dtype : Dtype::f32;
  cu::dispatch_float(a.grad_dtype, "adamw_step", "grad_dtype", [&](auto gtag) {
    using G = cu::elem_t<decltype(gtag)>;
    cu::dispatch_float(pd, "adamw_step", "param_dtype", [&](auto ptag) {
      using P = cu::elem_t<decltype(ptag)>;
      adamw_kernel<G, P><<<cu::grid_for(a.n, 256, int64_t(132) * 16), 256, 0, stream>>>(
          a.master, a.exp_avg, a.exp_avg_sq, static_cast<const G*>(a.grad),
          static_cast<P*>(a.param), a.n, k, a.loss_scale, a.found_inf);
      PARALAB_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace paralab::kernels
