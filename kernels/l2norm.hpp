// kernels/l2norm.hpp — partial sum of squares of a buffer, for global gradient-norm
// clipping.
//
// Gradient clipping by global norm (Pascanu, Mikolov & Bengio 2013, "On the difficulty of
// training recurrent neural networks", ICML, Algorithm 1; Megatron-LM's clip_grad_norm_fp32):
//   norm = sqrt(sum over all grad buffers and all ranks of sum_i g_i^2)
//   clip_coef = min(1, max_norm / (norm + 1e-6)), passed to the optimizer as grad_scale.
// This kernel computes one buffer's sum_i x_i^2 (fp32 accumulation) and adds it to *out;
// the executor sums buffers, all-reduces over the model-parallel group and takes the root.
// The CPU twin sums in a fixed blocked order (deterministic); the CUDA version reduces per
// block then combines the block partials in a fixed order (deterministic for a given n).
// Shapes: buf [n] in `dtype`; out is one fp32 (a device pointer on CUDA).
#pragma once

#include <cstdint>

#include "kernels/common.hpp"
#include "kernels/dtype.hpp"

namespace paralab::kernels {

struct L2NormSqArgs {
  const void* buf = nullptr;  // [n] dtype
  int64_t n = 0;
  Dtype dtype = Dtype::f32;
  float* out = nullptr;       // [1] fp32
  bool accumulate = false;    // true: *out += sum; false: *out = sum
};

void l2norm_sq_check(const L2NormSqArgs& a);

void l2norm_sq_cpu(const L2NormSqArgs& a);
// Uses a small stream-ordered scratch (cudaMallocAsync, <= 8 KiB).
void l2norm_sq_cuda(const L2NormSqArgs& a, cudaStream_t stream);

}  // namespace paralab::kernels
