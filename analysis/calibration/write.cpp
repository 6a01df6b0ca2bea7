// paralab — the calibrated topology as a file (calibrate.hpp, calibration_toml): written through
// the topology format's field tables (ir/topology_format.hpp), the values the fits set noted with
// how they were obtained, and a header saying what measured them, where and when
// (docs/calibration.md, "File").
#include <cstdio>
#include <string>

#include "analysis/calibration/calibrate.hpp"
#include "ir/enum_names.hpp"
#include "ir/topology_format.hpp"

namespace paralab::calib {

namespace {

std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

// Where the device's peaks come from: the host's cores x clock x lanes, the GPU's SMs x clock x
// its architecture's FLOP per clock, or the base topology's datasheet.
void peak_notes(const CalibrationResult& r, TopologyNotes& n) {
  std::string from;
  if (!r.gpu && r.base.device.kind == DeviceKind::cpu)
    from = fmt("%.0f MHz x 2 FMA units x SIMD lanes x 2 FLOP (/proc/cpuinfo); bf16/fp16 at their measured rates", r.host.cpu_mhz);
  else if (r.gpu && r.base.device.kind == DeviceKind::cpu)
    from = fmt("%.0f SMs x %.0f MHz x sm_", static_cast<double>(r.gpu->sm_count), r.gpu->sm_clock_mhz) +
           std::to_string(r.gpu->compute_capability()) + "'s FLOP/clock (exec/device_identity.cpp)";
  else if (r.gpu)
    from = "from the base topology ('" + r.base.device.name + "', measured on " + r.gpu->name + ")";
  else
    from = "from the base topology";
  for (const char* k : {"device.peak_fp32_tflops", "device.peak_tf32_tflops", "device.peak_bf16_tflops", "device.peak_fp16_tflops",
                        "device.peak_fp8_tflops"})
    n[k] = from;
}

TopologyNotes notes(const CalibrationResult& r, const Topology& t) {
  TopologyNotes n;
  peak_notes(r, n);
  if (auto it = r.gemm.find(MathMode::f32); it != r.gemm.end())
    n["device.gemm_max_efficiency"] = fmt("fitted: fp32 GEMM rate %.4g TFLOP/s over %.0f shapes", it->second.flop_per_us * 1e-6,
                                          static_cast<double>(it->second.fit.samples));
  if (r.stream.fit.samples > 0) {
    n["device.launch_overhead_us"] = fmt("fitted intercept of t = t0 + bytes/BW over %.0f kernel shapes (rms error %.0f%%)",
                                         static_cast<double>(r.stream.fit.samples), 100 * r.stream.fit.rms_rel_error);
    n["device.mem_efficiency"] = fmt("fitted kernel bandwidth %.4g GB/s / mem_bw_gbps", r.stream.gbps());
  }
  if (r.copy_gbps > 0) n["device.mem_bw_gbps"] = "measured streaming copy per rank, every rank at once";
  if (r.flash_fwd_efficiency > 0) n["device.flash_fwd_efficiency"] = "fitted over the attention_fwd points";
  if (r.flash_bwd_efficiency > 0) n["device.flash_bwd_efficiency"] = "fitted over the attention_bwd points";
  if (r.comm_fit) {
    const std::string over = fmt(" (alpha-beta fit over %.0f calls, rms error %.0f%%)", static_cast<double>(r.comm_fit->fit.samples),
                                 100 * r.comm_fit->fit.rms_rel_error);
    n["node.intra_bw_gbps"] = "fitted B" + over;
    n["node.intra_lat_us"] = "fitted alpha per step" + over;
    n["collectives.launch_lat_us"] = "fitted L per call" + over;
    n["collectives.reduce_gbps"] = "fitted reduction rate" + over;
  }
  if (t.node.cores > 0 && r.gpu == std::nullopt) n["node.cores"] = "this host's, shared by every rank";
  for (size_t i = 0; i < t.calibration.corrections.rows().size(); ++i)
    n["calibration.correction#" + std::to_string(i)] = t.calibration.corrections.rows()[i].cls.label();
  return n;
}

}  // namespace

std::string calibration_toml(const CalibrationResult& r) {
  const Topology t = calibrated_topology(r);
  const HostInfo& h = r.host;
  std::string header = t.name + ": written by `paralab calibrate --backend " + r.backend + "` (docs/calibration.md).\n";
  header += "Measured " + r.started_utc + " on " + h.hostname + " (" + h.cpu_model + ", " + std::to_string(h.cores) +
            " logical CPUs, " + h.cpu_flags_summary + ") by " + std::to_string(r.ranks) + " ranks at once, paralab " +
            r.paralab_version + ".\n";
  header += fmt("%.0f timed passes per replay after a warm-up pass; medians. Wall time %.1f s.", r.reps, r.wall_s) +
            " Load average " + h.loadavg_start + " -> " + h.loadavg_end + ".\n";
  if (r.gpu) header += "The GPU measured: " + r.gpu->name + fmt(" (sm_%.0f, %.0f MHz).\n", r.gpu->compute_capability(), r.gpu->sm_clock_mhz);
  std::string names;
  for (const auto& s : r.scenarios) names += (names.empty() ? "" : ", ") + s;
  if (!names.empty()) header += "Scenarios measured exactly: " + names + ".\n";
  if (!t.calibration.executions.empty())
    header += "Executed: the [[calibration.execution]] entries; the corrections are fitted to how their steps differ from\n"
              "their simulation on this hardware.\n";
  if (r.compute_cpu_time)
    header += "More ranks than cores: replayed ops timed by thread CPU time (node.cores is shared by the simulator).\n";
  header += "Based on topology '" + r.base.name + "' (" + r.base.file.string() + "); fitted values replace its own.";
  return topology_toml(t, header, notes(r, t));
}

}  // namespace paralab::calib
