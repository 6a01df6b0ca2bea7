// kernels/adamw.hpp — AdamW optimizer step on fp32 master weights (mixed precision).
//
// Sources: Kingma & Ba 2015, "Adam: A Method for Stochastic Optimization" (ICLR), Algorithm 1
// (moments, bias correction); Loshchilov & Hutter 2019, "Decoupled Weight Decay
// Regularization" (ICLR), Algorithm 2 (decay applied to the weights, not the gradient), in
// the form of PyTorch's torch.optim.AdamW / Apex FusedAdam(adam_w_mode=True) used by
// Megatron-LM. For step t >= 1 and each element:
//   g     = grad * grad_scale / (*loss_scale if given)          (unscale + clip, fused)
//   m     = beta1 m + (1 - beta1) g
//   v     = beta2 v + (1 - beta2) g^2
//   theta = theta - lr * weight_decay * theta
//               - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
//   param = theta rounded to param_dtype (the model's copy for the next forward)
// If found_inf is given and *found_inf != 0 (an inf/NaN in this step's grads, see
// loss_scale.hpp), nothing is written: the step is skipped without a host synchronization.
// Bias corrections are computed in double on the host. Shapes: every buffer is [n].
#pragma once

#include <cstdint>

#include "kernels/common.hpp"
#include "kernels/dtype.hpp"

namespace paralab::kernels {

struct AdamWArgs {
  float* master = nullptr;          // [n] fp32 master weights, updated in place
  float* exp_avg = nullptr;         // [n] fp32 first moment m
  float* exp_avg_sq = nullptr;      // [n] fp32 second moment v
  const void* grad = nullptr;       // [n] grad_dtype (bf16/f16 model grads or fp32 main grads)
  Dtype grad_dtype = Dtype::f32;
  void* param = nullptr;            // [n] param_dtype, optional copy of the updated weights
  Dtype param_dtype = Dtype::bf16;
  int64_t n = 0;
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.f;
  int64_t step = 1;                 // t, counted from 1 (bias correction)
  float grad_scale = 1.f;           // host multiplier: clip coefficient, 1/S, ...
  const float* loss_scale = nullptr;   // optional scalar S (device on CUDA): g /= S
  const int32_t* found_inf = nullptr;  // optional flag (device on CUDA): skip when != 0
};

void adamw_check(const AdamWArgs& a);

void adamw_step_cpu(const AdamWArgs& a);
void adamw_step_cuda(const AdamWArgs& a, cudaStream_t stream);
// Optimizer offload's host step (adamw_host.cpp): adamw_step_cpu on `threads` threads, the same
// bits. Every pointer is host memory (pinned, under offload).
void adamw_step_host(const AdamWArgs& a, int threads);

}  // namespace paralab::kernels
