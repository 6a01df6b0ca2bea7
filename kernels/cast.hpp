// kernels/cast.hpp — elementwise dtype conversion between f32, bf16, f16, fp8 e4m3/e5m2.
//
// Rounding and special values are those of kernels/dtype.hpp: round to nearest even;
// bf16/f16 overflow to +-Inf (IEEE 754-2019 Sec. 7.4), NaN stays NaN; fp8 saturates to the
// largest finite value (OCP OFP8 spec rev 1.0 with satfinite, as __NV_SATFINITE), NaN -> NaN.
// Widening casts are exact. Used for fp32 master -> bf16 model weights (also fused into the
// optimizers), fp32 main grads, fp8 GEMM operands.
// Shapes: src [n] in src_dtype, dst [n] in dst_dtype (must not overlap src unless they are
// the same buffer with the same element size).
#pragma once

#include <cstdint>

#include "kernels/common.hpp"
#include "kernels/dtype.hpp"

namespace paralab::kernels {

struct CastArgs {
  const void* src = nullptr;
  Dtype src_dtype = Dtype::f32;
  void* dst = nullptr;
  Dtype dst_dtype = Dtype::bf16;
  int64_t n = 0;
};

void cast_check(const CastArgs& a);

void cast_cpu(const CastArgs& a);
void cast_cuda(const CastArgs& a, cudaStream_t stream);

}  // namespace paralab::kernels
