// paralab — fused (flash) attention cost (docs/simulator.md, "Attention").
//
// FlashAttention computes softmax(QK^T)V tile by tile in on-chip memory (Dao et al. 2022,
// Dao 2023): it is bound by the tensor cores, at a fraction of the GEMM peak that the kernel's
// authors measured (DeviceSpec::flash_fwd_efficiency / flash_bwd_efficiency, sources in the
// topology files). The IR counts the full s_q x s_k score matrix (Korthikanti et al. Eq. 7
// accounting); with a causal mask the kernel skips the blocks above the diagonal and executes
// about half of it. Under context parallelism each ring step attends to one KV block; with
// Megatron's load-balanced sequence split every step executes about half a full block too,
// so the same factor applies per step. The backward op already counts its 2.5x (score
// recomputation). Unfused attention is not costed here: it is GEMMs (attn_qk, attn_pv, ...)
// and memory-bound softmax/dropout kernels, each costed by its own family.
#include <algorithm>

#include "sim/compute/compute_model.hpp"

namespace paralab::sim {

double attention_model_us(const Op& op, const DeviceSpec& dev) {
  const AttentionAttrs* a = op.attention();
  const MathMode math = a ? a->math : MathMode::bf16;
  const bool causal = a ? a->causal : true;
  const double executed = op.flops * (causal ? 0.5 : 1.0);
  const double eff = op.kind == OpKind::attention_bwd ? dev.flash_bwd_efficiency : dev.flash_fwd_efficiency;
  const double t_compute = executed / (peak_flop_per_us(dev, math) * eff);
  const double t_memory = op.bytes / mem_bytes_per_us(dev);
  return std::max(t_compute, t_memory) + dev.launch_overhead_us;
}

}  // namespace paralab::sim
