// paralab — the calibration `paralab validate` makes when none is given or cached (its step 1;
// docs/calibration.md, "validate"): `paralab calibrate SCENARIO` as a child process into the
// cache's file, its in-situ launches between the blocks of the reference's executions
// (interleave, the default) or before them; calibrating first, made again while its
// prediction is at odds with its own executions of the scenario (analysis/in_sample.hpp).
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "analysis/reference_runs.hpp"
#include "analysis/validate.hpp"

namespace paralab::calib {

// Makes v.calibration for opts.scenario (`s`, loaded with opts.sets), `exe` the paralab
// executable to run, and sets v.calibrate_s, v.calibration_in_sample_pct and
// v.host_drift.interleaved. With opts.interleave and several in-situ launches it runs refs' blocks between
// them (all of refs' runs then done); otherwise none. Throws std::runtime_error naming the child
// job that failed; a failed attempt to make it again leaves v.calibration as it was.
void make_calibration(const ValidateOptions& opts, const std::filesystem::path& exe, const Scenario& s,
                      ReferenceRuns& refs, ValidateOutcome& v, const std::function<void(const std::string&)>& log);

}  // namespace paralab::calib
