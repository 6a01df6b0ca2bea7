// paralab — the measured op times of a calibration (Topology::calibration's GEMM and kernel
// points, written by `paralab calibrate`) as the compute model consults them.
//
// GEMM points are keyed by (m, n, k, batch, math). An op whose shape is in the table takes the
// measured time. Otherwise the nearest point of the same math mode (distance: sum of |log
// ratio| over m, n, k and batch) is scaled by the analytic model's ratio between the op's shape
// and the point's shape:  t = t_point * model(op shape) / model(point shape).  Near a point this
// keeps the measurement's absolute level (what the model gets wrong about this machine) and
// takes the shape dependence (waves, tiles, roofline) from the model.
//
// Kernel points are keyed by (kind, bytes moved). Exact bytes: the measured time. Between two
// points of the kind: linear interpolation in bytes (memory-bound kernels are latency +
// bytes / bandwidth, linear in bytes). Outside the measured range: the nearest point scaled by
// the model's ratio, as for GEMMs. Kinds or math modes without points fall back to the model.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "ir/step_graph.hpp"
#include "ir/topology.hpp"

namespace paralab::sim {

class ProfileTable {
 public:
  ProfileTable() = default;
  ProfileTable(const Calibration& cal, const DeviceSpec& dev);

  // Measured (or scaled) time of a GEMM of this shape; nullopt without points for its math.
  [[nodiscard]] std::optional<double> gemm_us(const GemmAttrs& g) const;
  // Measured (interpolated or scaled) time of a kernel of this kind moving `bytes`.
  [[nodiscard]] std::optional<double> kernel_us(OpKind kind, double bytes) const;
  [[nodiscard]] bool empty() const { return gemm_.empty() && kernel_count_ == 0; }

  // The analytic costs the table scales with, from the key alone (shape / bytes).
  [[nodiscard]] double gemm_shape_model_us(const GemmAttrs& g) const;
  [[nodiscard]] double kernel_bytes_model_us(double bytes) const;

 private:
  DeviceSpec dev_;
  std::vector<GemmPoint> gemm_;
  // Per OpKind: points sorted by bytes (ties: first in the file wins).
  std::array<std::vector<KernelPoint>, static_cast<size_t>(OpKind::kCount)> kernels_{};
  size_t kernel_count_ = 0;
};

}  // namespace paralab::sim
