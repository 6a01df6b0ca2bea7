// paralab — the kinds of op a StepGraph holds. Kept in its own small header because the
// topology's calibration tables are keyed by it and CUDA code may include it.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace paralab {

enum class OpKind : uint8_t {
  // matrix multiplies
  gemm,            // C[m,n] (+)= op(A) op(B), batched
  attention_fwd,   // fused flash-style attention core (Dao et al. 2022)
  attention_bwd,
  // memory-bound kernels (kernels/ has one file pair each)
  layernorm_fwd, layernorm_bwd,
  rmsnorm_fwd, rmsnorm_bwd,
  gelu_fwd, gelu_bwd,
  swiglu_fwd, swiglu_bwd,
  softmax_fwd, softmax_bwd,        // scaled, causal-masked softmax (unfused attention)
  dropout_fwd, dropout_bwd,        // attention-probability dropout (mask stored)
  dropout_add_fwd, dropout_add_bwd,// bias + dropout + residual add
  rope_fwd, rope_bwd,
  embedding_fwd, embedding_bwd,
  xent_max, xent_sum, xent_loss, xent_bwd,  // vocab-parallel cross-entropy stages
  cast,
  grad_norm,       // local sum of squares for gradient clipping
  overflow_check,  // fp16 loss scaling: inf/NaN over gradients
  scaler_update,   // fp16 loss scaling state machine
  optimizer_step,  // Adam(W) or SGD on this rank's parameter shard (on the device or the host)
  copy,            // host <-> device copy on a copy engine (Stream::d2h / h2d): optimizer offload
  launch,          // the host thread launching the next op on every GPU (Stream::host): nn.DataParallel
  // communication
  collective,
  send,
  recv,
  sendrecv,
  kCount
};

constexpr bool is_comm(OpKind k) {
  return k == OpKind::collective || k == OpKind::send || k == OpKind::recv ||
         k == OpKind::sendrecv;
}
constexpr bool is_matmul(OpKind k) {
  return k == OpKind::gemm || k == OpKind::attention_fwd || k == OpKind::attention_bwd;
}

std::string_view to_string(OpKind k);
std::optional<OpKind> op_kind_from_string(std::string_view s);

}  // namespace paralab
