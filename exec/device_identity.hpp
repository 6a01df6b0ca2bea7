// paralab exec — what a backend can say about the device it runs on (a GPU's name, SMs, clock,
// memory), so that a calibration or a measured result describes the device that was measured
// rather than the one the scenario's topology names (a CPU host's scenario executed on a GPU,
// a dgx-h100 scenario on an H200). Plain data: no CUDA headers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ir/topology.hpp"  // MathMode, DeviceKind

namespace paralab::exec {

struct DeviceIdentity {
  std::string name;         // cudaDeviceProp::name, e.g. "NVIDIA H200"
  int cc_major = 0, cc_minor = 0;
  int64_t sm_count = 0;
  double sm_clock_mhz = 0;  // the peak SM clock the driver reports (cudaDevAttrClockRate)
  double memory_gib = 0;    // device memory (cudaDeviceProp::totalGlobalMem)
  double mem_bw_gbps = 0;   // theoretical: 2 x memory clock x bus width (DDR/HBM), read + write
  double l2_mib = 0;

  [[nodiscard]] int compute_capability() const { return cc_major * 10 + cc_minor; }

  // Dense peak in TFLOP/s of one math mode: SMs x peak SM clock x the architecture's FLOP per
  // SM per clock (architecture_flop_per_clock). 0 where the architecture is not in the table or
  // has no such math. At the reported peak clock, so above the datasheet's figure where NVIDIA
  // quotes tensor peaks at a lower clock (H100 SXM: 1,070 against 989.4 bf16 TFLOP/s).
  [[nodiscard]] double peak_tflops(MathMode m) const;
};

// The peak a measured MFU divides by where it is not the scenario topology's own: the device's
// dense peak of `math` when a CPU host's topology (`topology_kind` cpu) ran on this GPU, else 0
// (the topology's peak stands: a GPU topology names the datasheet the user chose).
double measured_mfu_peak_tflops(const std::optional<DeviceIdentity>& device, DeviceKind topology_kind, MathMode math);

// Dense FLOP per SM per clock of one math mode on compute capability cc (major * 10 + minor);
// 0 where unknown. Tensor cores for tf32/bf16/f16/fp8, CUDA cores for fp32. Sources in the .cpp.
double architecture_flop_per_clock(int cc, MathMode m);

}  // namespace paralab::exec
