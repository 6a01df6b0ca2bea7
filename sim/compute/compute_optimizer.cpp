// paralab — optimizer-phase kernels: the (multi-tensor) Adam/SGD step over a gradient bucket,
// the local gradient-norm and overflow reductions, and the loss-scaler update
// (docs/simulator.md, "Optimizer").
//
// Fused optimizers (Apex/Megatron multi_tensor_apply Adam) read the gradient, the fp32 master
// weights and both moments and write the master, the moments and the low-precision weights:
// a pure stream over HBM, some 10-20 FLOPs per parameter on the vector units. The IR gives the
// bytes of every view the op reads and writes, so the cost is the streaming roofline.
#include "sim/compute/compute_model.hpp"

namespace paralab::sim {

double optimizer_model_us(const Op& op, const DeviceSpec& dev) {
  return streaming_us(op.bytes, op.flops, dev);
}

}  // namespace paralab::sim
