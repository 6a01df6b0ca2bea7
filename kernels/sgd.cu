// kernels/sgd.cu — CUDA SGD step (formulas and semantics: sgd.hpp). Elementwise,
// grid-stride; skip flag and loss scale read from device scalars (no host sync).
#include "kernels/cuda_utils.cuh"
#include "kernels/sgd.hpp"

namespace paralab::kernels {
namespace {

using cu::ld;
using cu::st;

template <class G, class P>
__global__ void sgd_kernel(float* master, float* buf_p, const G* grad, P* param, int64_t n,
                           float lr, float mu, float damp, float wd, bool nesterov, bool first,
                           float grad_scale, const float* loss_scale, const int32_t* found_inf) {
  if (found_inf != nullptr && *found_inf != 0) return;
  const float mult = loss_scale != nullptr ? grad_scale / *loss_scale : grad_scale;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float th = master[i];
    float g = ld(grad, i) * mult + wd * th;
    if (mu != 0.f) {
      const float buf = first ? g : mu * buf_p[i] + damp * g;
      buf_p[i] = buf;
      g = nesterov ? g + mu * buf : buf;
    }
    const float nt = th - lr * g;
    master[i] = nt;
    if (param != nullptr) st(param, i, nt);
  }
}

}  // namespace

void sgd_step_cuda(const SgdArgs& a, cudaStream_t stream) {
  sgd_check(a);
  const Dtype pd = a.param != nullptr ? a.param_dtype : Dtype::f32;
  cu::dispatch_float(a.grad_dtype, "sgd_step", "grad_dtype", [&](auto gtag) {
    using G = cu::elem_t<decltype(gtag)>;
    cu::dispatch_float(pd, "sgd_step", "param_dtype", [&](auto ptag) {
      using P = cu::elem_t<decltype(ptag)>;
      sgd_kernel<G, P><<<cu::grid_for(a.n, 256, int64_t(132) * 16), 256, 0, stream>>>(
          a.master, a.momentum_buf, static_cast<const G*>(a.grad), static_cast<P*>(a.param),
          a.n, a.lr, a.momentum, 1.f - a.dampening, a.weight_decay, a.nesterov, a.step == 1,
          a.grad_scale, a.loss_scale, a.found_inf);
      PARALAB_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace paralab::kernels
