// paralab calibrate --from-step-time RUNS.toml --out FILE: fit correction rows to measured step
// times of a user's own runs (analysis/calibration/step_time_fit.hpp; docs/calibration.md).
#pragma once

#include <string>

#include "apps/cli.hpp"

namespace paralab::cli {

// Fits, prints the terms and the runs before and after, writes the topology to `out`; 0 on
// success. Throws UsageError / ConfigError / std::invalid_argument for bad input.
int run_calibrate_from_step_time(const Args& a, const std::string& runs_file, const std::string& out);

}  // namespace paralab::cli
