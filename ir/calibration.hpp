// paralab — what `paralab calibrate` measured on a machine, beside its hardware description:
// the measured times of op shapes (the compute model takes them where they apply), the table of
// corrections (ir/correction.hpp), and the steps the calibration executed (validate's yardstick;
// the simulator does not read them). Stored in a topology file's [calibration] section and its
// [[calibration.*]] arrays (docs/calibration.md, "File").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/correction.hpp"
#include "ir/dtype.hpp"
#include "ir/op_kind.hpp"

namespace paralab {

// The file's schema: 2 since the corrections table replaced the per-effect keys (a file with
// calibration data and another version is refused, naming `paralab calibrate --upgrade`).
inline constexpr int64_t kCalibrationSchema = 2;

// A GEMM shape's measured time (median over its runs).
struct GemmPoint {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  MathMode math = MathMode::f32;
  double time_us = 0;
};
// A memory-bound kernel's measured time for the bytes it reads and writes.
struct KernelPoint {
  OpKind kind = OpKind::cast;
  int64_t bytes = 0;
  double time_us = 0;
};
// A scenario the calibration executed, and how long its steps took then.
struct ExecutionPoint {
  std::string scenario;  // the scenario's name
  std::string digest;    // its scenario_digest (model, training, layout keys)
  int64_t executions = 0;
  double step_median_s = 0, step_min_s = 0, step_max_s = 0;
};

struct Calibration {
  int64_t schema_version = 0;  // 0: the file has no calibration
  std::string source;          // how and where it was measured
  std::vector<GemmPoint> gemm;
  std::vector<KernelPoint> kernels;
  CorrectionTable corrections;
  std::vector<ExecutionPoint> executions;

  [[nodiscard]] bool empty() const { return gemm.empty() && kernels.empty() && corrections.empty(); }
};

}  // namespace paralab
