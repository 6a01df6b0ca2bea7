// paralab exec/cuda — the CUDA backend's memory-bound ops: the kernel table built from the
// families (kernel_families.hpp: ops_norm.cpp, ops_pointwise.cpp, ops_token.cpp,
// ops_optimizer.cpp), each on the kernels/ CUDA launchers with the IR's conventions exactly as
// the CPU backend applies them (exec/cpu/kernel_ops.cpp is the reference): [rows, 2] statistics,
// gradient outputs that accumulate in fp32 (into an fp32 scratch added to non-fp32 views),
// residual-gradient accumulation, dropout seeds and sequence-parallel offsets, RoPE on the Q/K
// columns of qkv, vocab-parallel embedding with learned positions on tensor rank 0, the IR's
// cross-entropy stages, and the optimizer step whose loss scale, overflow flag and clipping
// coefficient stay on the device (no host synchronization).
#include <string>

#include "exec/cuda/kernel_families.hpp"
#include "ir/error.hpp"

namespace paralab::exec::cuda {

void expect(const OpCall& call, bool read, size_t i, int64_t numel, const char* what) {
  const auto& refs = read ? call.plan.reads : call.plan.writes;
  if (i >= refs.size())
    throw InternalError("op " + op_label(call.op) + ": missing " + (read ? "read " : "write ") + std::to_string(i) + " (" +
                        what + ")");
  if (refs[i].numel != numel)
    throw InternalError("op " + op_label(call.op) + ": " + what + " has " + std::to_string(refs[i].numel) +
                        " elements, expected " + std::to_string(numel));
}

const CudaKernelTable& kernel_table() {
  static const CudaKernelTable table = [] {
    CudaKernelTable t("CUDA");
    add_norm_ops(t);
    add_pointwise_ops(t);
    add_token_ops(t);
    add_optimizer_ops(t);
    return t;
  }();
  return table;
}

void run_kernel(const OpCall& call, CudaOpContext& ctx) { kernel_table().run(call, ctx); }

}  // namespace paralab::exec::cuda
