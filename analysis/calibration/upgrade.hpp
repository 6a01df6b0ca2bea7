// paralab — `paralab calibrate --upgrade OLD NEW`: a calibration written before schema 2 (its
// host-noise and executor parameters in the topology) turned into the current one
// (docs/calibration.md, "Upgrading"):
//   - the hardware keys, the measured op times ([[calibration.gemm]], [[calibration.kernel]])
//     and the executions' steps are kept as they were;
//   - the host costs real on any machine become rows of the correction table:
//     device.dispatch_us -> dispatch (every op), device.stream_handoff_us -> hand-off
//     (communication), device.compute_handoff_us -> hand-off (compute; absent: the stream's),
//     and each [[calibration.call]] -> time (its collective kind within a node, its phase):
//     fixed = its launch_lat_us - collectives.launch_lat_us;
//   - what described a host's noise or the executor's poller is dropped, and said so:
//     compute_tail, handoff_on_core_us, sync_skew_us, sync_drift, spread_drift, p2p_ack_us,
//     poll_spin_us, poll_yield_us, wake_us, contended_lat_us, call_tail_us,
//     [[calibration.dispatch]], a call's beside_lat_us and executed_us, an execution's
//     launches and step_fast_s.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "ir/topology.hpp"

namespace paralab::calib {

struct Upgrade {
  Topology topology;                  // schema 2
  std::vector<std::string> converted; // "device.dispatch_us = 1.953 -> dispatch (every op): fixed 1.953 us"
  std::vector<std::string> dropped;   // "device.compute_tail = 0.00088 (a host's noise)"
};

// Reads `old_file` (a topology whose calibration predates schema 2; a current one is returned as
// it is). Throws ConfigError naming file, line, key and value for anything it cannot read, and
// std::invalid_argument when two [[calibration.call]] entries convert to the same class with
// different costs (it names them).
Upgrade upgrade_calibration(const std::filesystem::path& old_file);

// The upgraded file's text: a header naming the old file, what was converted and dropped.
std::string upgrade_toml(const Upgrade& u, const std::filesystem::path& old_file);

}  // namespace paralab::calib
