// paralab exec/cpu — the families of memory-bound ops that fill the CPU backend's kernel table
// (exec/kernel_table.hpp), one file each, and what they share: the kernels' arguments
// (exec/kernel_args.hpp, the same as the CUDA backend's), the op's site and the fp32 gradient
// output. kernel_ops.cpp builds the table from the families listed here.
#pragma once

#include <algorithm>
#include <cstdint>

#include "exec/cpu/cpu_math.hpp"
#include "exec/kernel_args.hpp"
#include "exec/kernel_table.hpp"

namespace paralab::exec::cpu {

using CpuKernelTable = KernelTable<CpuContext>;

// layernorm / rmsnorm forward and backward (norm_ops.cpp).
void add_norm_ops(CpuKernelTable& t);
// gelu, swiglu, softmax, dropout, dropout + add (pointwise_ops.cpp).
void add_pointwise_ops(CpuKernelTable& t);
// rope, embedding, the vocab-parallel cross-entropy stages (token_ops.cpp).
void add_token_ops(CpuKernelTable& t);
// cast and gradient accumulation, gradient norm, overflow check, optimizer step, loss-scale
// update (optimizer_ops.cpp).
void add_optimizer_ops(CpuKernelTable& t);

// The backend's table, built once from the families above.
const CpuKernelTable& kernel_table();

inline args::OpSite site(const CpuContext& c) { return {c.plan, c.shape, c.scenario}; }

// A gradient output the kernels write in fp32 (dgamma, dbias, d table): the view itself when it
// is fp32, else an fp32 scratch added into the view (in its dtype) by commit().
class F32Grad {
 public:
  F32Grad(void* p, const ResolvedRef& r, float* scratch) : p_(p), r_(r), scratch_(scratch) {
    if (r_.dtype != DType::f32) std::fill(scratch_, scratch_ + r_.numel, 0.0f);
  }
  [[nodiscard]] float* ptr() const { return r_.dtype == DType::f32 ? static_cast<float*>(p_) : scratch_; }
  // The kernel's `accumulate` flag: straight into an fp32 view it accumulates, into the scratch not.
  [[nodiscard]] bool kernel_accumulates() const { return r_.dtype == DType::f32; }
  void commit() const {
    if (r_.dtype != DType::f32) add_into(p_, r_.dtype, r_.numel, scratch_, true);
  }

 private:
  void* p_;
  const ResolvedRef& r_;
  float* scratch_;
};

}  // namespace paralab::exec::cpu
