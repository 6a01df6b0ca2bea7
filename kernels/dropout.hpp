// kernels/dropout.hpp — dropout with a stored uint8 mask, and the fused bias-dropout-add.
//
// Inverted dropout (Srivastava et al. 2014, JMLR 15 "Dropout", scaled at training time as in
// PyTorch): y = x * mask * s, s = 1/(1-p), mask[i] in {0, 1} drawn from the counter-based
// stream of kernels/rng.hpp at position offset + i (identical on CPU and GPU).
// Fused bias-dropout-add (Megatron-LM's bias_dropout_add_fused_train,
// megatron/core/fusions/fused_bias_dropout.py), over [rows, cols]:
//   out[r,c] = residual[r,c] + mask[r,c] * s * (x[r,c] + bias[c])     (bias optional)
// With p = 0 every mask bit is 1 and s = 1: out = residual + (x + bias), exactly.
// Backward (from the stored mask): dx = dout * mask * s; dresidual = dout (the executor
// reuses dout's buffer, no kernel); dbias[c] = sum_r dx[r,c] (fp32, from unrounded dx).
// The mask is stored as uint8 (1 byte per element), the size paralab's memory model counts
// (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
// Table 2).
#pragma once

#include <cstdint>

#include "kernels/common.hpp"
#include "kernels/dtype.hpp"

namespace paralab::kernels {

struct DropoutFwdArgs {
  const void* x = nullptr;   // [n] dtype
  void* y = nullptr;         // [n] dtype; may alias x
  uint8_t* mask = nullptr;   // [n] out, 1 = kept; null = not stored
  int64_t n = 0;
  float p = 0.f;             // drop probability in [0, 1]
  uint64_t seed = 0;
  uint64_t offset = 0;       // stream position of element 0
  Dtype dtype = Dtype::f32;
};

struct DropoutBwdArgs {
  const void* dy = nullptr;       // [n] dtype
  const uint8_t* mask = nullptr;  // [n] from forward; may be null only when p == 0
  void* dx = nullptr;             // [n] dtype; may alias dy
  int64_t n = 0;
  float p = 0.f;                  // same p as forward (gives the scale)
  Dtype dtype = Dtype::f32;
};

struct DropoutAddFwdArgs {
  const void* x = nullptr;         // [rows, cols] dtype (e.g. attention/MLP output projection)
  const void* bias = nullptr;      // [cols] dtype; null = no bias
  const void* residual = nullptr;  // [rows, cols] dtype
  void* out = nullptr;             // [rows, cols] dtype; may alias x or residual
  uint8_t* mask = nullptr;         // [rows, cols] out, 1 = kept; null = not stored
  int64_t rows = 0;
  int64_t cols = 0;
  float p = 0.f;
  uint64_t seed = 0;
  uint64_t offset = 0;             // stream position of element (0, 0); element (r, c) is at
                                   // offset + r * cols + c
  Dtype dtype = Dtype::f32;
};

struct DropoutAddBwdArgs {
  const void* dout = nullptr;     // [rows, cols] dtype
  const uint8_t* mask = nullptr;  // [rows, cols]; may be null only when p == 0
  void* dx = nullptr;             // [rows, cols] dtype; may alias dout
  float* dbias = nullptr;         // [cols] fp32; null = not computed
  bool accumulate = false;        // dbias += (true) or = (false)
  int64_t rows = 0;
  int64_t cols = 0;
  float p = 0.f;
  Dtype dtype = Dtype::f32;
};

void dropout_fwd_check(const DropoutFwdArgs& a);
void dropout_bwd_check(const DropoutBwdArgs& a);
void dropout_add_fwd_check(const DropoutAddFwdArgs& a);
void dropout_add_bwd_check(const DropoutAddBwdArgs& a);

void dropout_fwd_cpu(const DropoutFwdArgs& a);
void dropout_bwd_cpu(const DropoutBwdArgs& a);
void dropout_add_fwd_cpu(const DropoutAddFwdArgs& a);
void dropout_add_bwd_cpu(const DropoutAddBwdArgs& a);

void dropout_fwd_cuda(const DropoutFwdArgs& a, cudaStream_t stream);
void dropout_bwd_cuda(const DropoutBwdArgs& a, cudaStream_t stream);
void dropout_add_fwd_cuda(const DropoutAddFwdArgs& a, cudaStream_t stream);
void dropout_add_bwd_cuda(const DropoutAddBwdArgs& a, cudaStream_t stream);

}  // namespace paralab::kernels
