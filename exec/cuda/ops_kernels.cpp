// paralab exec/cuda — the CUDA backend's memory-bound ops: the kernel table built from the
// families (kernel_families.hpp: ops_norm.cpp, ops_pointwise.cpp, ops_token.cpp,
// ops_optimizer.cpp), each on the kernels/ CUDA launchers with the kernels' arguments the CPU
// backend also uses (exec/kernel_args.hpp: the IR's conventions, once). What is the CUDA
// backend's own: fp32 gradient staging in stream-ordered scratch, strided device copies for the
// statistics and positions, the cross-entropy stages of device_ops.hpp, and an optimizer step
// whose loss scale, overflow flag and clipping coefficient stay on the device (no host
// synchronization).
#include "exec/cuda/kernel_families.hpp"

namespace paralab::exec::cuda {

const CudaKernelTable& kernel_table() {
  static const CudaKernelTable table("CUDA", {add_norm_ops, add_pointwise_ops, add_token_ops, add_optimizer_ops, add_offload_ops});
  return table;
}

void run_kernel(const OpCall& call, CudaOpContext& ctx) { kernel_table().run(call, ctx); }

}  // namespace paralab::exec::cuda
