// paralab — files that list runs of scenarios: `[[sweep]]` for `plan` (a sweep of scenarios to
// plan side by side) and `[[run]]` for `calibrate --from-step-time` (runs with their measured
// step times). Each entry: scenario (relative to the file), optional set (';'-separated
// overrides) and label, and for [[run]] the required step_time_s.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace paralab::cli {

struct RunEntry {
  std::string label;
  std::string scenario;             // path, resolved against the list file's folder
  std::vector<std::string> sets;    // section.key=value overrides
  double step_time_s = 0;           // [[run]] only: the measured step (seconds)
};

// The `array` entries of `file` ("sweep" or "run"; "run" requires step_time_s), or nothing when
// the file has no such array (it is a scenario). Throws ConfigError naming file, line and key for
// an unknown key, a missing scenario or step time, or top-level keys beside the entries.
std::optional<std::vector<RunEntry>> read_run_list(const std::string& file, const std::string& array);

}  // namespace paralab::cli
