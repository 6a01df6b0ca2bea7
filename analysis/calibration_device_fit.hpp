// paralab — the device figures a calibration implies (peaks and GEMM efficiency from the
// measured rates), shared by the calibrated topology and its file (calibration_topology.cpp,
// calibration_toml.cpp). Internal to analysis/.
#pragma once

#include "analysis/calibrate.hpp"

namespace paralab::calib::detail {

struct DeviceFit {
  double peak_fp32 = 0, gemm_eff = 0, peak_bf16 = 0, peak_f16 = 0;
};

// The fp32 peak (the host's theoretical one on a CPU, raised when the measured GEMM rate beats
// it), the GEMM efficiency against it, and bf16/f16 "peaks" that make peak x efficiency their
// measured rates on a CPU (converted and multiplied in fp32).
DeviceFit device_fit(const CalibrationResult& r);

}  // namespace paralab::calib::detail
