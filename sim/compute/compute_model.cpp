// paralab — the compute model: dispatch by op kind to the registered families, calibration
// overrides, and the shared peak/bandwidth helpers.
#include "sim/compute/compute_model.hpp"

#include <string>

#include "ir/error.hpp"

namespace paralab::sim {

double peak_flop_per_us(const DeviceSpec& dev, MathMode m) {
  double tflops = dev.peak(m);
  if (tflops <= 0) tflops = dev.peak(MathMode::f32);
  if (tflops <= 0) throw InternalError("compute model: device '" + dev.name + "' has no fp32 peak");
  return tflops * 1e6;  // 1 TFLOP/s = 1e12 FLOP/s = 1e6 FLOP/us
}

double mem_bytes_per_us(const DeviceSpec& dev) {
  const double b = dev.mem_bw_gbps * dev.mem_efficiency * 1e3;  // 1 GB/s = 1e3 B/us
  if (b <= 0) throw InternalError("compute model: device '" + dev.name + "' has no memory bandwidth");
  return b;
}

ComputeModel::ComputeModel(const Topology& topo) : dev_(topo.device), cal_(topo.calibration, topo.device) {
  has_host_ = topo.host.described();
  if (has_host_) {
    host_dev_ = host_share(topo);
    copy_dev_ = copy_engine(topo);
  }
  for (const CostFamily& f : cost_families())
    for (OpKind k : f.kinds) {
      auto& slot = by_kind_[static_cast<size_t>(k)];
      if (slot) throw InternalError("compute model: op kind " + std::string(to_string(k)) + " is in two families");
      slot = &f;
    }
  for (int k = 0; k < static_cast<int>(OpKind::kCount); ++k)
    if (!is_comm(static_cast<OpKind>(k)) && !by_kind_[static_cast<size_t>(k)])
      throw InternalError("compute model: no cost family for op kind " + std::string(to_string(static_cast<OpKind>(k))));
}

const DeviceSpec& ComputeModel::device_for(const Op& op) const {
  if (!off_device(op.stream) || op.kind == OpKind::launch) return dev_;  // a launch: the device's own cost
  if (!has_host_)
    throw InternalError("compute model: op " + op.full_name() + " runs off the device, but the topology has no [host]");
  return op.kind == OpKind::copy ? copy_dev_ : host_dev_;
}

double ComputeModel::model_us(const Op& op) const {
  if (is_comm(op.kind)) return 0.0;
  return by_kind_[static_cast<size_t>(op.kind)]->model_us(op, device_for(op));
}

double ComputeModel::duration_us(const Op& op) const {
  if (is_comm(op.kind)) return 0.0;
  // The calibration's points are the device's kernels: off-device ops keep the model.
  if (!cal_.empty() && !off_device(op.stream)) {
    std::optional<double> t;
    if (const GemmAttrs* g = op.gemm()) t = cal_.gemm_us(*g);
    else t = cal_.kernel_us(op.kind, op.bytes);
    if (t) return *t;
  }
  return model_us(op);
}

std::string_view ComputeModel::family(OpKind k) const {
  const CostFamily* f = by_kind_[static_cast<size_t>(k)];
  return f ? f->name : std::string_view{};
}

std::vector<double> ComputeModel::durations(const StepGraph& g) const {
  std::vector<double> d(g.ops.size(), 0.0);
  for (size_t i = 0; i < g.ops.size(); ++i) d[i] = duration_us(g.ops[i]);
  return d;
}

}  // namespace paralab::sim
