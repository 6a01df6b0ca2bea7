// kernels/attention_mma.hpp — the tensor-core path of the fused attention kernels (internal to
// kernels/: attention.cu dispatches to it). bf16 and fp16 operands, fp32 accumulation and
// softmax, head_dim <= 128. Formulas and shapes: attention.hpp.
#pragma once

#include <cuda_runtime.h>

#include "kernels/attention.hpp"

namespace paralab::kernels::attn_mma {

// Whether the tensor-core kernels take this case: 16-bit floats and head_dim <= 128.
bool eligible(Dtype dtype, int64_t head_dim);

// Forward: out and lse (may be null) as attention.hpp defines them. `scale` is resolved.
void forward(const AttentionFwdArgs& a, float scale, cudaStream_t stream);

// Backward: dq, dk, dv from the saved lse and Dvec[b, h, s] = dO . O (fp32, device).
void backward(const AttentionBwdArgs& a, float scale, const float* Dvec, cudaStream_t stream);

}  // namespace paralab::kernels::attn_mma
