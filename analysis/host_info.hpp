// paralab — the host a calibration measures (its CPU, clock, caches, memory and load) and the
// paralab build that measured it: the calibrated file's header, and the key of validate's
// calibration cache (docs/calibration.md, "The file").
#pragma once

#include <string>

namespace paralab::calib {

struct HostInfo {
  std::string hostname, cpu_model, cpu_flags_summary;  // "avx2 fma", "avx512f fma"
  int cores = 0;               // CPUs the job's ranks on this host share (Transport::node_cores)
  double cpu_mhz = 0;          // /proc/cpuinfo (nominal on VMs)
  double theoretical_fp32_tflops_per_core = 0;
  double l2_mib = 0, mem_total_gib = 0;
  std::string loadavg_start, loadavg_end;  // /proc/loadavg
};
HostInfo host_info(int cores);

// /proc/loadavg's first fields, e.g. "0.08 0.65 1.35 1/123 4567": another tenant's work shows
// there before and after a calibration.
std::string loadavg();

// "0.1.0+<hash of this executable>": what calibration caches are keyed by.
std::string paralab_version();

}  // namespace paralab::calib
