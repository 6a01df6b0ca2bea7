// paralab — from the calibration's samples to the hardware they describe (calibrate.hpp,
// fit_hardware and calibrated_hardware; docs/calibration.md, "Fits"): the device's peaks and
// GEMM efficiency from the measured rates, the streaming kernels' launch time and bandwidth, the
// fused attention efficiencies, the links' bandwidth and latency and the collectives' launch cost
// from the alpha-beta fit, and the measured op times as the compute model's points.
#include <algorithm>
#include <cmath>
#include <set>

#include "analysis/calibration/calibrate.hpp"
#include "ir/enum_names.hpp"

namespace paralab::calib {

namespace {

bool describes_host(const CalibrationResult& r) { return !r.gpu && r.base.device.kind == DeviceKind::cpu; }

// The described device's peaks (TFLOP/s per MathMode) and GEMM efficiency: the base's, the host
// CPU's (cores x clock x lanes), or the GPU's measured (SMs x clock x FLOP per clock); raised
// to rate / 0.99 where the fp32 GEMM rate beats it (turbo). Where peaks come from measured rates
// (a CPU host, an unknown GPU) bf16/f16 "peaks" make peak x efficiency their measured rates (a
// CPU converts and multiplies them in fp32), tf32 as fp32, no fp8.
struct DeviceFit {
  std::array<double, kMathModes> peak{};
  double gemm_eff = 0;
};

DeviceFit device_fit(const CalibrationResult& r) {
  DeviceFit d;
  const DeviceSpec& b = r.base.device;
  d.peak = b.peak_tflops;
  d.gemm_eff = b.gemm_max_efficiency;
  bool from_rates = false;
  if (describes_host(r)) {
    from_rates = true;
    if (r.host.theoretical_fp32_tflops_per_core > 0) d.peak[math_index(MathMode::f32)] = r.host.theoretical_fp32_tflops_per_core;
  } else if (r.gpu && b.kind == DeviceKind::cpu) {  // a CPU host's scenario executed on a GPU
    from_rates = r.gpu->peak_tflops(MathMode::f32) <= 0;
    for (MathMode m : {MathMode::f32, MathMode::tf32, MathMode::bf16, MathMode::f16, MathMode::fp8, MathMode::mxfp8,
                       MathMode::nvfp4})
      d.peak[math_index(m)] = from_rates ? 0.0 : r.gpu->peak_tflops(m);
  }
  auto f32 = r.gemm.find(MathMode::f32);
  if (f32 == r.gemm.end() || f32->second.flop_per_us <= 0) return d;
  const double rate = f32->second.flop_per_us * 1e-6;  // TFLOP/s
  double& p32 = d.peak[math_index(MathMode::f32)];
  if (p32 <= 0 || rate / p32 > 0.99) p32 = rate / 0.99;
  d.gemm_eff = rate / p32;
  if (!from_rates) return d;
  for (MathMode m : {MathMode::tf32, MathMode::bf16, MathMode::f16}) d.peak[math_index(m)] = p32;
  for (MathMode m : {MathMode::fp8, MathMode::mxfp8, MathMode::nvfp4}) d.peak[math_index(m)] = 0;
  for (MathMode m : {MathMode::bf16, MathMode::f16}) {
    auto it = r.gemm.find(m);
    if (it != r.gemm.end() && it->second.flop_per_us > 0) d.peak[math_index(m)] = it->second.flop_per_us * 1e-6 / d.gemm_eff;
  }
  if (r.gemm.count(MathMode::bf16) && !r.gemm.count(MathMode::f16)) d.peak[math_index(MathMode::f16)] = d.peak[math_index(MathMode::bf16)];
  return d;
}

// Fused attention: t - t_launch = executed FLOPs / (P(math) x efficiency), regressed on
// x = executed FLOPs / P(math): the slope is 1 / efficiency (the simulator's model,
// sim/compute/compute_attention.cpp).
double attention_efficiency(const CalibrationResult& r, const DeviceFit& dev, OpKind kind) {
  std::vector<std::vector<double>> X;
  std::vector<double> y;
  for (const OpSamples& s : r.compute) {
    if (s.key.kind != kind) continue;
    const double t = s.median_us() - std::max(0.0, r.stream.latency_us);
    const double peak_flop_per_us = dev.peak[math_index(s.key.math)] * 1e6;
    if (t > 0 && s.exec_flops > 0 && peak_flop_per_us > 0) {
      X.push_back({s.exec_flops / peak_flop_per_us});
      y.push_back(t);
    }
  }
  if (X.empty()) return 0.0;
  const LinearFit f = relative_least_squares(X, y, true);
  return f.coef[0] > 0 ? std::clamp(1.0 / f.coef[0], 1e-4, 1.0) : 0.0;
}

}  // namespace

void fit_hardware(CalibrationResult& r) {
  std::vector<GemmSample> gs;
  std::set<MathMode> maths;
  std::vector<StreamSample> ss;
  for (const OpSamples& s : r.compute) {
    const double t = s.median_us();
    if (t <= 0) continue;
    if (s.key.kind == OpKind::gemm) {
      gs.push_back({s.key.m, s.key.n, s.key.k, s.key.batch, s.key.math, t});
      maths.insert(s.key.math);
    } else if (!is_comm(s.key.kind) && !is_matmul(s.key.kind) && s.bytes > 0) {
      ss.push_back({"", s.bytes, t});
    }
  }
  r.gemm.clear();
  for (MathMode m : maths) r.gemm[m] = fit_gemm(gs, m);
  r.stream = ss.empty() ? StreamFit{} : fit_streaming(ss);
  const DeviceFit dev = device_fit(r);
  r.flash_fwd_efficiency = attention_efficiency(r, dev, OpKind::attention_fwd);
  r.flash_bwd_efficiency = attention_efficiency(r, dev, OpKind::attention_bwd);
  // The scenarios' calls weigh by how often they occur; the sweep together weighs a tenth of
  // them (it keeps the fit sane beyond the scenarios' sizes), or everything alike without them.
  double scenario_weight = 0;
  int64_t sweep_points = 0;
  for (const CommPoint& p : r.comm) {
    scenario_weight += p.weight;
    sweep_points += p.weight <= 0;
  }
  const double sweep_weight = scenario_weight > 0 && sweep_points > 0 ? 0.1 * scenario_weight / static_cast<double>(sweep_points) : 1.0;
  std::vector<CommSample> cs;
  for (const CommPoint& p : r.comm)
    if (p.median_us() > 0) cs.push_back({p.pattern, p.group, static_cast<double>(p.bytes), p.median_us(), p.weight > 0 ? p.weight : sweep_weight});
  r.comm_fit.reset();
  if (!cs.empty()) r.comm_fit = fit_alpha_beta(cs);
}

Topology calibrated_hardware(const CalibrationResult& r) {
  Topology t = r.base;
  t.name = r.base.name + "-calibrated";
  t.description = "calibrated by paralab calibrate on " + r.host.hostname + " (" + r.started_utc + ")";
  DeviceSpec& d = t.device;
  const DeviceFit f = device_fit(r);
  d.peak_tflops = f.peak;
  d.gemm_max_efficiency = std::clamp(f.gemm_eff, 1e-4, 1.0);
  if (describes_host(r)) {
    d.name = r.host.cpu_model.empty() ? d.name : r.host.cpu_model;
    if (r.host.mem_total_gib > 0) d.memory_gib = std::floor(100.0 * r.host.mem_total_gib / std::max(1, r.ranks)) / 100.0;
    if (r.host.l2_mib > 0) d.l2_mib = r.host.l2_mib;
  } else if (r.gpu) {  // the GPU measured, whatever the base names
    const exec::DeviceIdentity& g = *r.gpu;
    d.kind = DeviceKind::gpu;
    if (!g.name.empty()) d.name = g.name;
    if (g.sm_count > 0) d.sm_count = g.sm_count;
    if (g.memory_gib > 0) d.memory_gib = std::floor(100.0 * g.memory_gib) / 100.0;
    if (g.l2_mib > 0) d.l2_mib = g.l2_mib;
    if (g.mem_bw_gbps > 0) d.mem_bw_gbps = g.mem_bw_gbps;
  }
  if (r.stream.fit.samples > 0) {
    d.launch_overhead_us = std::max(0.0, r.stream.latency_us);
    if (r.copy_gbps > 0) d.mem_bw_gbps = r.copy_gbps;
    if (r.stream.bytes_per_us > 0 && d.mem_bw_gbps > 0) d.mem_efficiency = std::clamp(r.stream.gbps() / d.mem_bw_gbps, 1e-3, 1.0);
  }
  if (r.flash_fwd_efficiency > 0) d.flash_fwd_efficiency = r.flash_fwd_efficiency;
  if (r.flash_bwd_efficiency > 0) d.flash_bwd_efficiency = r.flash_bwd_efficiency;
  t.node.devices_per_node = std::max<int64_t>(t.node.devices_per_node, r.ranks);
  if (describes_host(r)) t.node.cores = r.host.cores;
  if (r.comm_fit) {
    const AlphaBetaFit& c = *r.comm_fit;
    if (c.bytes_per_us > 0) t.node.intra_link.bw_gbps = c.gbps();
    t.node.intra_link.lat_us = c.step_us;
    t.node.intra_link.efficiency = 1.0;
    t.collectives.launch_lat_us = c.launch_us;
    t.collectives.p2p_launch_lat_us.reset();
    t.collectives.step_lat_us = 0.0;
    t.collectives.reduce_gbps = c.reduce_gbps();
  }
  t.calibration = Calibration{};
  t.calibration.schema_version = kCalibrationSchema;
  t.calibration.source = "paralab calibrate --backend " + r.backend + ", " + std::to_string(r.ranks) + " ranks on " +
                         r.host.hostname + " (" + r.host.cpu_model + "), " + r.started_utc + ", paralab " + r.paralab_version;
  for (const OpSamples& s : r.compute) {
    const double t_us = s.median_us();
    if (t_us <= 0) continue;
    if (s.key.kind == OpKind::gemm) t.calibration.gemm.push_back({s.key.m, s.key.n, s.key.k, s.key.batch, s.key.math, t_us});
    else if (s.key.bytes > 0) t.calibration.kernels.push_back({s.key.kind, s.key.bytes, t_us});
  }
  return t;
}

}  // namespace paralab::calib
