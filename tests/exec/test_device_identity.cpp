// paralab tests — a GPU's dense peaks from its SMs, clock and architecture
// (exec/device_identity.hpp) reproduce NVIDIA's datasheet figures at the clocks they are quoted
// at, and an architecture not in the table has no peak rather than a guessed one.
#include <catch2/catch.hpp>

#include <optional>

#include "exec/device_identity.hpp"

using namespace paralab;
using exec::DeviceIdentity;

namespace {
DeviceIdentity gpu(int cc_major, int cc_minor, int64_t sms, double mhz) {
  DeviceIdentity d;
  d.name = "test GPU";
  d.cc_major = cc_major;
  d.cc_minor = cc_minor;
  d.sm_count = sms;
  d.sm_clock_mhz = mhz;
  return d;
}
}  // namespace

TEST_CASE("H100 SXM: the whitepaper's dense peaks from 132 SMs", "[exec][device]") {
  // Tensor peaks are quoted at 1,830 MHz, FP32's at 1,980 MHz (H100 whitepaper, Table 3).
  const DeviceIdentity tensor_clock = gpu(9, 0, 132, 1830);
  CHECK(tensor_clock.peak_tflops(MathMode::bf16) == Approx(989.4).epsilon(1e-3));
  CHECK(tensor_clock.peak_tflops(MathMode::f16) == Approx(989.4).epsilon(1e-3));
  CHECK(tensor_clock.peak_tflops(MathMode::tf32) == Approx(494.7).epsilon(1e-3));
  CHECK(tensor_clock.peak_tflops(MathMode::fp8) == Approx(1978.9).epsilon(1e-3));
  CHECK(gpu(9, 0, 132, 1980).peak_tflops(MathMode::f32) == Approx(66.9).epsilon(1e-3));
}

TEST_CASE("A100 and V100: the datasheets' dense peaks", "[exec][device]") {
  const DeviceIdentity a100 = gpu(8, 0, 108, 1410);  // A100 whitepaper: 19.5 / 156 / 312 TFLOP/s
  CHECK(a100.peak_tflops(MathMode::f32) == Approx(19.5).epsilon(3e-3));
  CHECK(a100.peak_tflops(MathMode::tf32) == Approx(156).epsilon(3e-3));
  CHECK(a100.peak_tflops(MathMode::bf16) == Approx(312).epsilon(3e-3));
  CHECK(a100.peak_tflops(MathMode::fp8) == 0);  // no FP8 tensor cores before Ada
  const DeviceIdentity v100 = gpu(7, 0, 80, 1530);  // V100 SXM2: 15.7 fp32, 125 fp16 tensor
  CHECK(v100.peak_tflops(MathMode::f32) == Approx(15.7).epsilon(3e-3));
  CHECK(v100.peak_tflops(MathMode::f16) == Approx(125.3).epsilon(3e-3));
  CHECK(v100.peak_tflops(MathMode::bf16) == 0);  // no bf16 on Volta
  CHECK(gpu(8, 6, 72, 1695).peak_tflops(MathMode::bf16) == Approx(125).epsilon(3e-3));  // A10
}

TEST_CASE("an architecture not in the table has no peak", "[exec][device]") {
  for (MathMode m : {MathMode::f32, MathMode::tf32, MathMode::bf16, MathMode::f16, MathMode::fp8}) {
    CHECK(gpu(10, 0, 148, 1965).peak_tflops(m) == 0);
    CHECK(gpu(6, 0, 56, 1480).peak_tflops(m) == 0);
  }
  CHECK(gpu(9, 0, 132, 1980).compute_capability() == 90);
}

TEST_CASE("a measured MFU divides by the GPU's peak only where the topology is a CPU host's", "[exec][device]") {
  const std::optional<DeviceIdentity> h200 = gpu(9, 0, 132, 1980);
  CHECK(exec::measured_mfu_peak_tflops(h200, DeviceKind::cpu, MathMode::f16) == Approx(1070.5).epsilon(1e-4));
  CHECK(exec::measured_mfu_peak_tflops(h200, DeviceKind::cpu, MathMode::f32) == Approx(66.9).epsilon(1e-3));
  CHECK(exec::measured_mfu_peak_tflops(h200, DeviceKind::gpu, MathMode::bf16) == 0);  // dgx-h100's 989.4 stands
  CHECK(exec::measured_mfu_peak_tflops(std::nullopt, DeviceKind::cpu, MathMode::f32) == 0);  // the CPU backend
}
