// paralab — offload's costs (docs/offload.md): a host <-> device copy over the GPU's link to
// host memory, and the devices the compute model times off-device ops on: the host's share of
// one GPU (its cores and DRAM bandwidth divided among the node's GPUs) and the copy engine.
#include <algorithm>

#include "sim/compute/compute_model.hpp"

namespace paralab::sim {

// A pinned cudaMemcpyAsync: bytes over the link at its sustained bandwidth, plus its fixed cost
// (DMA setup and the call), both carried by the copy engine's DeviceSpec (copy_engine below).
double copy_model_us(const Op& op, const DeviceSpec& dev) {
  return op.bytes / mem_bytes_per_us(dev) + dev.launch_overhead_us;
}

// The host's share of one GPU: the optimizer's threads stream over host DRAM (a fused Adam is
// bandwidth-bound on CPUs as on GPUs: ZeRO-Offload's CPU-Adam, Ren et al. 2021, Sec. 5.1) and
// vectorize over the cores. Per GPU: 1/devices of the node's bandwidth and cores.
DeviceSpec host_share(const Topology& t) {
  const HostSpec& h = t.host;
  const double gpus = static_cast<double>(std::max<int64_t>(1, t.node.devices_per_node));
  DeviceSpec d;
  d.kind = DeviceKind::cpu;
  d.name = t.device.name + " host share";
  d.sm_count = std::max<int64_t>(1, h.cores / std::max<int64_t>(1, t.node.devices_per_node));
  d.peak_tflops[math_index(MathMode::f32)] = std::max(1e-6, static_cast<double>(h.cores) * h.core_gflops / gpus * 1e-3);
  d.memory_gib = h.memory_gib / gpus;
  d.mem_bw_gbps = h.mem_bw_gbps / gpus;
  d.mem_efficiency = h.mem_efficiency;
  d.launch_overhead_us = 0;  // a host step is a call on the optimizer's threads, no kernel launch
  return d;
}

// The copy engine: its "memory" is the GPU's link to host memory, its launch the copy's fixed cost.
DeviceSpec copy_engine(const Topology& t) {
  DeviceSpec d;
  d.kind = DeviceKind::gpu;
  d.name = t.device.name + " copy engine";
  d.peak_tflops[math_index(MathMode::f32)] = t.device.peak(MathMode::f32);
  d.mem_bw_gbps = t.host.link.bw_gbps;
  d.mem_efficiency = t.host.link.efficiency;
  d.launch_overhead_us = t.host.link.lat_us;
  return d;
}

}  // namespace paralab::sim
