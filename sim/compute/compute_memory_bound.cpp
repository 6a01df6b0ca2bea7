// paralab — memory-bound kernels: norms, activations, (unfused) softmax and dropout, residual
// adds, rotary embedding, embedding lookup, the vocab-parallel cross-entropy stages and casts
// (docs/simulator.md, "Memory-bound kernels").
//
// These kernels stream their operands through HBM once: time = bytes / (peak bandwidth x
// mem_efficiency), the sustained fraction a streaming copy reaches (source in the topology
// file). Their few FLOPs per element run on the vector (non-tensor) units, whose peak is the
// device's fp32 peak; the slower of the two bounds wins (roofline, Williams et al. 2009).
// The launch overhead is the gap between dependent kernels on the GPU.
#include <algorithm>

#include "sim/compute/compute_model.hpp"

namespace paralab::sim {

double streaming_us(double bytes, double flops, const DeviceSpec& dev) {
  const double t_memory = bytes / mem_bytes_per_us(dev);
  const double t_compute = flops / peak_flop_per_us(dev, MathMode::f32);
  return std::max(t_memory, t_compute) + dev.launch_overhead_us;
}

double memory_bound_model_us(const Op& op, const DeviceSpec& dev) {
  return streaming_us(op.bytes, op.flops, dev);
}

}  // namespace paralab::sim
