// paralab — the device a calibration describes and the figures it implies (peaks and GEMM
// efficiency from the measured rates), shared by the calibrated topology, its file and the
// attention fit (calibration_topology.cpp, calibration_toml.cpp, calibration_fit.cpp).
// Internal to analysis/.
#pragma once

#include <array>

#include "analysis/calibrate.hpp"

namespace paralab::calib::detail {

// Where the described device's peaks come from.
enum class PeakSource : uint8_t {
  base,      // the base topology's device (a GPU topology calibrated on a GPU)
  host,      // the host CPU: cores x clock x lanes from /proc/cpuinfo (the cpu backend)
  device,    // the GPU measured: SMs x clock x its architecture's FLOP per clock (a CPU host's
             // topology calibrated on a GPU: exec::DeviceIdentity::peak_tflops)
  measured,  // a GPU of an architecture not in that table: the measured GEMM rates
};

struct DeviceFit {
  std::array<double, kMathModes> peak{};  // TFLOP/s per MathMode
  double gemm_eff = 0;
  PeakSource source = PeakSource::base;
  bool raised = false;  // the fp32 GEMM rate beat the nominal fp32 peak: peak = rate / 0.99

  [[nodiscard]] double at(MathMode m) const { return peak[math_index(m)]; }
};

// The fp32 peak (per PeakSource, raised when the measured GEMM rate beats it), the GEMM
// efficiency against it, and where peaks come from measured rates (host, measured) bf16/f16
// "peaks" that make peak x efficiency their measured rates (a CPU converts and multiplies
// them in fp32), tf32 as fp32 and no fp8.
DeviceFit device_fit(const CalibrationResult& r);

// Whether the calibration describes the host CPU (the cpu backend on a CPU topology) rather
// than a GPU.
bool describes_host(const CalibrationResult& r);

}  // namespace paralab::calib::detail
