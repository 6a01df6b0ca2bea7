// paralab — from fitted calibration values to a topology: the calibrated topology (the file
// the simulator loads is calibration_toml.cpp's; docs/calibration.md, "The file"). The fits
// are calibration_fit.cpp's.
#include <algorithm>
#include <cmath>

#include "analysis/calibrate.hpp"
#include "analysis/calibration_device_fit.hpp"
#include "analysis/run_noise.hpp"
#include "ir/topology_loader.hpp"

namespace paralab::calib {

namespace detail {

bool describes_host(const CalibrationResult& r) { return !r.gpu && r.base.device.kind == DeviceKind::cpu; }

DeviceFit device_fit(const CalibrationResult& r) {
  DeviceFit d;
  const DeviceSpec& b = r.base.device;
  d.peak = b.peak_tflops;
  d.gemm_eff = b.gemm_max_efficiency;
  if (describes_host(r)) {
    d.source = PeakSource::host;
    if (r.host.theoretical_fp32_tflops_per_core > 0) d.peak[math_index(MathMode::f32)] = r.host.theoretical_fp32_tflops_per_core;
  } else if (r.gpu && b.kind == DeviceKind::cpu) {
    // A CPU host's scenario executed on a GPU: the base's peaks are the host's, not the GPU's.
    d.source = r.gpu->peak_tflops(MathMode::f32) > 0 ? PeakSource::device : PeakSource::measured;
    for (MathMode m : {MathMode::f32, MathMode::tf32, MathMode::bf16, MathMode::f16, MathMode::fp8})
      d.peak[math_index(m)] = d.source == PeakSource::device ? r.gpu->peak_tflops(m) : 0.0;
  }
  const bool from_rates = d.source == PeakSource::host || d.source == PeakSource::measured;
  auto f32 = r.gemm.find(MathMode::f32);
  if (f32 != r.gemm.end() && f32->second.flop_per_us > 0) {
    const double rate = f32->second.flop_per_us * 1e-6;  // TFLOP/s
    double& p32 = d.peak[math_index(MathMode::f32)];
    if (p32 <= 0 || rate / p32 > 0.99) {  // faster than the nominal clock (turbo), or no nominal peak
      d.raised = p32 > 0;
      p32 = rate / 0.99;
    }
    d.gemm_eff = rate / p32;
    if (from_rates) {
      // bf16/f16 storage is converted and multiplied in fp32 on a CPU: their "peak" is what
      // makes P(math) x efficiency the measured rate (on an unknown GPU, likewise its tensor
      // cores' measured rates). tf32 as fp32, fp8 unknown (0: unsupported).
      const double p = p32;
      double& pb = d.peak[math_index(MathMode::bf16)];
      double& ph = d.peak[math_index(MathMode::f16)];
      pb = ph = p;
      d.peak[math_index(MathMode::tf32)] = p;
      d.peak[math_index(MathMode::fp8)] = 0;
      for (MathMode m : {MathMode::bf16, MathMode::f16}) {
        auto it = r.gemm.find(m);
        if (it == r.gemm.end() || it->second.flop_per_us <= 0) continue;
        (m == MathMode::bf16 ? pb : ph) = it->second.flop_per_us * 1e-6 / d.gemm_eff;
        if (m == MathMode::bf16 && r.gemm.find(MathMode::f16) == r.gemm.end()) ph = pb;
      }
    }
  }
  return d;
}

}  // namespace detail

using detail::DeviceFit;
using detail::device_fit;
using detail::describes_host;

Topology calibrated_topology(const CalibrationResult& r) {
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
  } else if (r.gpu) {
    // The GPU measured, whatever the base names (an H200 under dgx-h100, a GPU under cpu-host).
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
  if (describes_host(r)) {
    t.node.cores = r.host.cores;
    t.collectives.poll_spin_us = exec::kPollSpinUs;
    // Under core turns the executor's poller hands its turn to a waiting thread every 32 tests
    // (exec/mpi/mpi_transport.cpp, wait_all): a few us against ops of tens to hundreds.
    t.collectives.poll_yield_us = 0;
    if (r.in_situ_asleep_calls > 0) t.collectives.wake_us = r.wake_us;  // measured (fit_all)
  }
  if (r.have_comm_fit) {
    if (r.comm_fit.bytes_per_us > 0) t.node.intra_link.bw_gbps = r.comm_fit.gbps();
    t.node.intra_link.lat_us = r.comm_fit.step_us;
    // In situ the calls moved their bytes 1 + c times slower than the sweep (fit_all).
    const double slowdown = 1.0 + (r.have_in_situ_comm() ? r.comm_in_situ_bytes_slowdown : 0.0);
    t.node.intra_link.efficiency = 1.0 / slowdown;
    t.collectives.launch_lat_us = r.comm_fit.launch_us + (r.have_in_situ_comm() ? r.comm_in_situ_extra_us : 0.0);
    // The base topology's transfer cost is replaced too: by the transfers' own, by the sweep's L
    // alone (too few transfers beside enough collectives: fit_all), or by launch's.
    t.collectives.p2p_launch_lat_us.reset();
    if (r.have_in_situ_comm() && (r.p2p_extra_own || r.p2p_sweep_only)) t.collectives.p2p_launch_lat_us = r.comm_fit.launch_us + r.p2p_in_situ_extra_us;
    t.collectives.contended_lat_us =
        r.have_in_situ_comm() && r.contended_extra_own ? std::max(0.0, r.contended_in_situ_extra_us - r.comm_in_situ_extra_us) : 0.0;
    t.collectives.step_lat_us = 0.0;
    t.collectives.reduce_gbps = r.comm_fit.reduce_gbps() / slowdown;
  }
  if (!r.in_situ.dispatch_us.empty()) d.dispatch_us = r.dispatch_us;
  if (!r.in_situ.handoff_us.empty()) d.stream_handoff_us = r.stream_handoff_us;
  if (!r.in_situ.compute_handoff_us.empty()) d.compute_handoff_us = r.compute_handoff_us;
  if (!r.in_situ.handoff_us.empty()) d.handoff_on_core_us = r.handoff_on_core_us;
  if (r.compute_tail_samples > 0) d.compute_tail = r.compute_tail;
  if (!r.in_situ.arrivals.empty()) {
    t.collectives.sync_skew_us = r.sync_skew_us;
    t.collectives.sync_drift = r.sync_drift();
    t.collectives.spread_drift = r.spread_drift();
  }
  if (!r.in_situ.acks.empty()) t.collectives.p2p_ack_us = r.p2p_ack_us;
  if (r.have_in_situ_comm() && r.call_tail_executions > 0) t.collectives.call_tail_us = r.call_tail_us;
  t.calibration = Calibration{};
  t.calibration.source = "paralab calibrate --backend " + r.backend + ", " + std::to_string(r.ranks) + " ranks on " +
                         r.host.hostname + " (" + r.host.cpu_model + "), " + r.started_utc + ", paralab " + r.paralab_version;
  for (const OpSamples& s : r.compute) {
    const double t_us = s.median_us();
    if (t_us <= 0) continue;
    if (s.key.kind == OpKind::gemm)
      t.calibration.gemm.push_back({s.key.m, s.key.n, s.key.k, s.key.batch, s.key.math, t_us});
    else if (s.key.bytes > 0)
      t.calibration.kernels.push_back({s.key.kind, s.key.bytes, t_us});
  }
  t.calibration.dispatch = r.dispatch_by_busy;
  if (r.have_in_situ_comm())
    for (const CalibrationResult::CallCost& k : r.call_costs) {
      CallPoint p;
      p.collective = std::get<0>(k.cls);
      p.group = std::get<1>(k.cls);
      p.phase = std::get<2>(k.cls);
      p.launch_lat_us = r.comm_fit.launch_us + k.extra_us;
      if (k.beside_extra_us) p.beside_lat_us = r.comm_fit.launch_us + *k.beside_extra_us;
      p.executed_us = k.executed_us;
      t.calibration.calls.push_back(p);
    }
  for (const auto& [name, steps] : r.in_situ.step_s) {
    if (steps.s.empty()) continue;
    const auto [lo, hi] = std::minmax_element(steps.s.begin(), steps.s.end());
    t.calibration.executions.push_back(
        {name, steps.digest, static_cast<int64_t>(steps.s.size()), steps.launches, quantile(steps.s, 0.5), *lo, *hi,
         fast_half_step_s(steps.s)});
  }
  return t;
}

}  // namespace paralab::calib
