// paralab — the compute half of the simulator: how long one non-communication op of a
// StepGraph takes on one device. Durations do not depend on time (the network is the only
// time-dependent part of a simulation), so the engine asks once per op of a stage graph.
//
// Each op family (GEMMs, fused attention, memory-bound kernels, optimizer) is a cost function
// in its own file, registered in compute_registry.cpp; a new family is a file and a row, not a
// growing switch. Measurements from `paralab calibrate` (Topology::calibration) override the
// model per op shape (profile.hpp). Equations and sources: docs/simulator.md, "Compute".
#pragma once

#include <array>
#include <span>
#include <string_view>
#include <vector>

#include "ir/step_graph.hpp"
#include "ir/topology.hpp"
#include "sim/compute/profile.hpp"

namespace paralab::sim {

// One op family's analytic cost: the op's duration in microseconds on `dev`, launch overhead
// included. Never called for communication ops.
struct CostFamily {
  std::string_view name;                       // "gemm", "attention", "memory_bound", "optimizer"
  std::span<const OpKind> kinds;               // the op kinds it costs
  double (*model_us)(const Op& op, const DeviceSpec& dev);
};

// Every registered family (compute_registry.cpp). Each non-communication OpKind belongs to
// exactly one.
std::span<const CostFamily> cost_families();

class ComputeModel {
 public:
  explicit ComputeModel(const Topology& topo);

  // The op's duration: a calibration point's (exact or scaled, see profile.hpp) when the
  // topology has one for this op, else the analytic model's. 0 for communication ops.
  [[nodiscard]] double duration_us(const Op& op) const;
  // The analytic model alone (no calibration).
  [[nodiscard]] double model_us(const Op& op) const;
  // The family that costs this op ("" for communication ops).
  [[nodiscard]] std::string_view family(OpKind k) const;
  // duration_us of every op of a stage graph, indexed by OpId.
  [[nodiscard]] std::vector<double> durations(const StepGraph& g) const;

  [[nodiscard]] const DeviceSpec& device() const { return dev_; }
  // What times an op: the device, or for ops off the device (Stream::d2h / h2d / host: offload)
  // the copy engine or the host's share. Throws for those when the topology has no [host].
  [[nodiscard]] const DeviceSpec& device_for(const Op& op) const;

 private:
  DeviceSpec dev_;
  DeviceSpec host_dev_, copy_dev_;  // compute_offload.cpp
  bool has_host_ = false;
  ProfileTable cal_;
  std::array<const CostFamily*, static_cast<size_t>(OpKind::kCount)> by_kind_{};
};

// --- Cost functions, exposed for tests and docs (one file each) -------------------------------

// compute_gemm.cpp: fraction of the math peak a GEMM reaches: gemm_max_efficiency x the best
// tile/wave quantization over the candidate tiles x the pipeline-fill (small-k) factor. 1 means
// the device's full peak. CPU devices: gemm_max_efficiency (no waves, no tiles).
double gemm_efficiency(const GemmAttrs& g, const DeviceSpec& dev);
double gemm_model_us(const Op& op, const DeviceSpec& dev);
// The same from the shape alone; op_bytes <= 0 derives the operand traffic from the shape.
double gemm_shape_us(const GemmAttrs& g, double op_bytes, const DeviceSpec& dev);
// compute_attention.cpp: fused (flash) attention forward/backward.
double attention_model_us(const Op& op, const DeviceSpec& dev);
// compute_memory_bound.cpp: norms, activations, softmax, dropout, embedding, loss, casts.
double memory_bound_model_us(const Op& op, const DeviceSpec& dev);
// Roofline of a streaming kernel: max(bytes / sustained bandwidth, flops / fp32 peak) + launch.
double streaming_us(double bytes, double flops, const DeviceSpec& dev);
// compute_optimizer.cpp: optimizer step, gradient norm, overflow check, loss-scaler update.
double optimizer_model_us(const Op& op, const DeviceSpec& dev);
// compute_offload.cpp: a host <-> device copy on `dev` = copy_engine(t); the devices that time
// off-device ops.
double copy_model_us(const Op& op, const DeviceSpec& dev);
// compute_launch.cpp: one thread launching an op on `rows` GPUs in turn (nn.DataParallel).
double launch_model_us(const Op& op, const DeviceSpec& dev);
DeviceSpec host_share(const Topology& t);
DeviceSpec copy_engine(const Topology& t);

// Shared helpers (compute_model.cpp).
// Peak FLOP/us of a math mode (falls back to fp32 when the device lists no peak for it).
double peak_flop_per_us(const DeviceSpec& dev, MathMode m);
// Sustained memory bandwidth in bytes/us (mem_bw_gbps x mem_efficiency).
double mem_bytes_per_us(const DeviceSpec& dev);

}  // namespace paralab::sim
