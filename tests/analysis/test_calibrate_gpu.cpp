// paralab tests — a calibration made on a GPU describes the GPU it measured (exec::
// DeviceIdentity), whatever device its base topology names: a CPU host's scenario executed on
// a GPU gets the GPU's name, memory and architecture peaks, a GPU topology measured on another
// GPU keeps its datasheet peaks and takes the measured GPU's name and memory; and fused
// attention's efficiency is fitted against the peak of its own math, the one the simulator uses.
#include <catch2/catch.hpp>

#include <string>

#include "analysis/calibration/calibrate.hpp"
#include "ir/step_ir.hpp"
#include "ir/topology_loader.hpp"
#include "sim/simulate.hpp"
#include "../ir/test_util.hpp"
#include "calibrate_test_util.hpp"

using namespace paralab;
using namespace paralab::calib;
using namespace paralab::calib::testing;

namespace {
exec::DeviceIdentity h200() {
  exec::DeviceIdentity g;
  g.name = "NVIDIA H200";
  g.cc_major = 9;
  g.cc_minor = 0;
  g.sm_count = 132;
  g.sm_clock_mhz = 1980;
  g.memory_gib = 139.8065;
  g.mem_bw_gbps = 4915.2;
  g.l2_mib = 60;
  return g;
}

// The synthetic calibration of calibrate_test_util.hpp, as the cuda backend on an H200 made it.
CalibrationResult on_h200(const std::string& base_topology) {
  CalibrationResult r = synthetic_result(build_step_ir(test::scenario_from(cpu_scenario("cpu-host"))));
  r.backend = "cuda";
  r.gpu = h200();
  r.copy_gbps = 0;  // the cuda backend measures no host copy
  r.base = load_topology(data_dir() / "topologies" / (base_topology + ".toml"));
  fit_all(r);
  return r;
}
}  // namespace

TEST_CASE("a CPU host's scenario calibrated on a GPU describes the GPU", "[analysis][calibrate][gpu-identity]") {
  const CalibrationResult r = on_h200("cpu-host");
  const std::string text = calibration_toml(r);
  test::TempFile file(text, "calibrated.toml");
  const Topology t = load_topology(file.path());  // the simulator accepts it as it is
  CHECK(t.device.kind == DeviceKind::gpu);
  CHECK(t.device.name == "NVIDIA H200");
  CHECK(t.device.sm_count == 132);
  CHECK(t.device.memory_gib == Approx(139.8));
  CHECK(t.device.mem_bw_gbps == Approx(4915.2));
  CHECK(t.device.l2_mib == Approx(60));
  // Peaks from the architecture, not the host's /proc/cpuinfo nor rates raised to the GPU's.
  CHECK(t.device.peak(MathMode::bf16) == Approx(132 * 1980e6 * 4096 * 1e-12).epsilon(1e-4));
  CHECK(t.device.peak(MathMode::fp8) == Approx(132 * 1980e6 * 8192 * 1e-12).epsilon(1e-4));
  CHECK(t.device.peak(MathMode::f32) == Approx(132 * 1980e6 * 256 * 1e-12).epsilon(1e-4));
  // The measured fp32 GEMM rate (40e3 FLOP/us: 0.04 TFLOP/s) is the peak times the efficiency.
  CHECK(t.device.peak(MathMode::f32) * t.device.gemm_max_efficiency == Approx(0.04).epsilon(0.05));
  CHECK(text.find("132 SMs x 1980 MHz x sm_90's FLOP/clock") != std::string::npos);
  CHECK(text.find("/proc/cpuinfo") == std::string::npos);
  // Not a CPU host: no shared cores.
  CHECK(t.node.cores == 0);
  // The synthetic attention runs at 8e3 FLOP/us in fp32: its efficiency against the GPU's fp32 peak.
  CHECK(t.device.flash_fwd_efficiency == Approx(0.008 / t.device.peak(MathMode::f32)).epsilon(0.05));
  CHECK(sim::simulate(build_step_ir(test::scenario_from(cpu_scenario(file.path().string())))).result.step_time_s > 0);
}

TEST_CASE("a GPU topology calibrated on another GPU keeps its peaks and takes the GPU's name and memory",
          "[analysis][calibrate][gpu-identity]") {
  const CalibrationResult r = on_h200("dgx-h100");
  const std::string text = calibration_toml(r);
  test::TempFile file(text, "calibrated.toml");
  const Topology t = load_topology(file.path());
  const Topology base = load_topology(data_dir() / "topologies" / "dgx-h100.toml");
  CHECK(t.device.kind == DeviceKind::gpu);
  CHECK(t.device.name == "NVIDIA H200");
  CHECK(t.device.memory_gib == Approx(139.8));
  CHECK(t.device.mem_bw_gbps == Approx(4915.2));
  CHECK(t.device.peak(MathMode::bf16) == base.device.peak(MathMode::bf16));
  CHECK(t.device.peak(MathMode::tf32) == base.device.peak(MathMode::tf32));
  CHECK(text.find("from the base topology ('" + base.device.name + "', measured on NVIDIA H200)") != std::string::npos);
}

TEST_CASE("fused attention's efficiency is fitted against the peak of its math", "[analysis][calibrate][gpu-identity]") {
  // bf16 flash attention on an H100 at half its bf16 peak, after a 5 us launch: the simulator
  // costs it as FLOPs / (P(bf16) x efficiency), so the fit must give 0.5, not the rate over
  // the fp32 peak (7.4, clamped to 1).
  CalibrationResult r = on_h200("dgx-h100");
  const double p_bf16 = r.base.device.peak(MathMode::bf16) * 1e6;  // FLOP/us
  r.compute.erase(std::remove_if(r.compute.begin(), r.compute.end(),
                                 [](const OpSamples& s) { return s.key.kind == OpKind::attention_fwd; }),
                  r.compute.end());
  for (int i = 1; i <= 6; ++i) {
    OpSamples s;
    s.key.kind = OpKind::attention_fwd;
    s.key.math = MathMode::bf16;
    s.key.bytes = int64_t{1} << (20 + i);
    s.exec_flops = 1e11 * i;
    s.flops = 2 * s.exec_flops;
    s.bytes = static_cast<double>(s.key.bytes);
    s.origin = "scenario test";
    const double t = 5.0 + r.stream.latency_us + s.exec_flops / (p_bf16 * 0.5);
    s.us = {t, t, t};
    r.compute.push_back(s);
  }
  fit_all(r);
  CHECK(r.flash_fwd_efficiency == Approx(0.5).epsilon(0.01));
}
