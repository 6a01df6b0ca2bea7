// paralab exec/cuda — the families of memory-bound ops that fill the CUDA backend's kernel
// table (exec/kernel_table.hpp), one file each, and what they share: the kernels' arguments
// (exec/kernel_args.hpp, the same as the CPU backend's), the op's site and the fp32 gradient
// output. Host-only (g++).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "exec/cuda/cuda_ops.hpp"
#include "exec/kernel_args.hpp"
#include "exec/kernel_table.hpp"

namespace paralab::exec::cuda {

using CudaKernelTable = KernelTable<CudaOpContext>;

// layernorm / rmsnorm forward and backward (ops_norm.cpp).
void add_norm_ops(CudaKernelTable& t);
// gelu, swiglu, softmax, dropout, dropout + add (ops_pointwise.cpp).
void add_pointwise_ops(CudaKernelTable& t);
// rope, embedding, the vocab-parallel cross-entropy stages (ops_token.cpp).
void add_token_ops(CudaKernelTable& t);
// cast and the accumulating copies, gradient norm, overflow check, optimizer step, loss-scale
// update (ops_optimizer.cpp).
void add_optimizer_ops(CudaKernelTable& t);
// Optimizer offload (ops_offload.cpp): host <-> device copies; the host's AdamW step (called by
// the optimizer op on Stream::host); the first failure of a host step since the last call.
void add_offload_ops(CudaKernelTable& t);
void host_optimizer(const OpCall& call, CudaOpContext& ctx);
std::string take_host_step_error();

// The backend's table, built once from the families above (ops_kernels.cpp).
const CudaKernelTable& kernel_table();

inline args::OpSite site(const CudaOpContext& c) { return {c.plan, c.shape, c.scenario}; }

// A gradient output the kernels write in fp32: the view itself when fp32, else a zeroed fp32
// scratch that commit() adds into the view (one rounding), as the CPU backend's F32Grad.
class F32Grad {
 public:
  F32Grad(void* p, const ResolvedRef& r, cudaStream_t s) : p_(p), r_(r), s_(s) {
    if (r_.dtype != DType::f32) {
      scratch_.emplace(r_.numel * 4, s_);
      PARALAB_CU(cudaMemsetAsync(scratch_->get(), 0, static_cast<size_t>(r_.numel) * 4, s_));
    }
  }
  [[nodiscard]] float* ptr() const { return scratch_ ? scratch_->f() : static_cast<float*>(p_); }
  [[nodiscard]] bool kernel_accumulates() const { return !scratch_; }
  void commit() const {
    if (scratch_) dev::copy2d(scratch_->get(), dev::T::f32, r_.numel, p_, dt(r_.dtype), r_.numel, 1, r_.numel, true, s_);
  }

 private:
  void* p_;
  const ResolvedRef& r_;
  cudaStream_t s_;
  std::optional<Scratch> scratch_;
};

}  // namespace paralab::exec::cuda
