// paralab exec — the architecture table behind DeviceIdentity::peak_tflops.
#include "exec/device_identity.hpp"

namespace paralab::exec {

double architecture_flop_per_clock(int cc, MathMode m) {
  // Dense FLOP per SM per clock (2 per FMA). Sources, each checked against its datasheet peak
  // = SMs x boost clock x this:
  //  7.0 V100 (Volta whitepaper: 64 FP32 lanes, 8 tensor cores x 64 FP16 FMA):        fp32 128, fp16 1024
  //  7.5 T4 (Turing whitepaper: same per-SM rates as Volta):                           fp32 128, fp16 1024
  //  8.0 A100 (A100 whitepaper, Table 1: 19.5 / 156 / 312 TFLOP/s at 108 SMs x 1.41 GHz): 128, tf32 1024, 16-bit 2048
  //  8.6 GA10x, 8.9 AD10x (A10, L40S datasheets: 128 FP32 lanes; tf32 512, 16-bit 1024, fp8 2048 on 8.9)
  //  9.0 H100/H200 (H100 whitepaper: 128 FP32 lanes; tf32 2048, 16-bit 4096, fp8 8192 per SM per clock)
  // Blackwell and later are not listed: their per-SM rates differ by product and power limit.
  const bool f32 = m == MathMode::f32, tf32 = m == MathMode::tf32, b16 = m == MathMode::bf16 || m == MathMode::f16,
             fp8 = m == MathMode::fp8;
  switch (cc) {
    case 70:
    case 75:
      // No bf16 or tf32 tensor math before Ampere: bf16 counts as 0 (unsupported), f16 1024.
      if (f32) return 128;
      if (m == MathMode::f16) return 1024;
      return 0;
    case 80:
      return f32 ? 128 : tf32 ? 1024 : b16 ? 2048 : 0;
    case 86:
      return f32 ? 256 : tf32 ? 512 : b16 ? 1024 : 0;
    case 89:
      return f32 ? 256 : tf32 ? 512 : b16 ? 1024 : fp8 ? 2048 : 0;
    case 90:
      return f32 ? 256 : tf32 ? 2048 : b16 ? 4096 : fp8 ? 8192 : 0;
    default:
      return 0;
  }
}

double measured_mfu_peak_tflops(const std::optional<DeviceIdentity>& device, DeviceKind topology_kind, MathMode math) {
  return device && topology_kind == DeviceKind::cpu ? device->peak_tflops(math) : 0.0;
}

double DeviceIdentity::peak_tflops(MathMode m) const {
  return static_cast<double>(sm_count) * sm_clock_mhz * 1e6 * architecture_flop_per_clock(compute_capability(), m) * 1e-12;
}

}  // namespace paralab::exec
