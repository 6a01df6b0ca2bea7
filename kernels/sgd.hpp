// kernels/sgd.hpp — SGD with momentum (and optional Nesterov, weight decay) on fp32 master
// weights.
//
// Source: Sutskever, Martens, Dahl & Hinton 2013, "On the importance of initialization and
// momentum in deep learning" (ICML), Eq. 1-2 (classical and Nesterov momentum), in the form
// of PyTorch's torch.optim.SGD (the optimizer Megatron-LM builds for optimizer = "sgd"):
//   g = grad * grad_scale / (*loss_scale if given) + weight_decay * theta
//   if momentum != 0:
//     buf = g                                         at step 1
//     buf = momentum * buf + (1 - dampening) * g      afterwards
//     g   = nesterov ? g + momentum * buf : buf
//   theta = theta - lr * g;   param = theta rounded to param_dtype
// found_inf != 0 skips the step (see adamw.hpp). Shapes: every buffer is [n].
#pragma once

#include <cstdint>

#include "kernels/common.hpp"
#include "kernels/dtype.hpp"

namespace paralab::kernels {

struct SgdArgs {
  float* master = nullptr;          // [n] fp32, updated in place
  float* momentum_buf = nullptr;    // [n] fp32; required when momentum != 0
  const void* grad = nullptr;       // [n] grad_dtype
  Dtype grad_dtype = Dtype::f32;
  void* param = nullptr;            // [n] param_dtype, optional model copy
  Dtype param_dtype = Dtype::bf16;
  int64_t n = 0;
  float lr = 1e-2f;
  float momentum = 0.f;
  float dampening = 0.f;
  float weight_decay = 0.f;
  bool nesterov = false;
  int64_t step = 1;                 // counted from 1; step 1 initializes the momentum buffer
  float grad_scale = 1.f;
  const float* loss_scale = nullptr;
  const int32_t* found_inf = nullptr;
};

void sgd_check(const SgdArgs& a);

void sgd_step_cpu(const SgdArgs& a);
void sgd_step_cuda(const SgdArgs& a, cudaStream_t stream);

}  // namespace paralab::kernels
