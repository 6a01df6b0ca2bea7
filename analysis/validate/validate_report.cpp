// paralab — validate's outcome as JSON and as a table (validate.hpp).
#include <algorithm>
#include <cstdio>

#include "analysis/validate/validate.hpp"

namespace paralab::calib {

nlohmann::json validate_json(const ValidateOutcome& v) {
  nlohmann::json j;
  j["scenario"] = v.scenario;
  if (v.slow_rank >= 0) j["slowdown"] = {{"rank", v.slow_rank}, {"factor", v.slowdown}};
  j["predicted"] = summary_json(v.predicted.result);
  j["measured"] = v.measured_summary.is_null() ? summary_json(v.measured.result) : v.measured_summary;
  j["step_time_error_pct"] = v.comparison.step_time_error_pct;
  j["op_mape_pct"] = v.comparison.op_mape_pct;
  j["comparison"] = to_json(v.comparison);
  j["calibration"] = {{"file", v.calibration.string()}, {"made_now", v.calibration_made}, {"wall_s", v.calibrate_s}};
  if (const auto& h = v.host_drift; h.executions > 0)
    j["calibration"]["executed"] = {{"executions", h.executions},
                                    {"step_median_s", h.calibrated_step_s},
                                    {"measured_step_median_s", h.measured_step_s},
                                    {"host_drift_pct", h.pct()}};
  // A noise figure that needs more executions than were made is null, not 0 ("no noise").
  auto measured_if = [&](double pct) { return v.runs >= 2 ? nlohmann::json(pct) : nlohmann::json(nullptr); };
  j["execute"] = {{"command", v.launch},
                  {"runs", v.runs},
                  {"launches", v.launches},
                  {"runs_step_time_s", v.run_step_times_s},
                  {"wall_s", v.execute_s},
                  {"run_to_run_op_mape_pct", measured_if(v.run_to_run_op_mape_pct)},
                  {"run_to_run_step_spread_pct", measured_if(v.run_to_run_step_spread_pct)},
                  {"reference_spread_pct", measured_if(v.reference_spread_pct)},
                  {"tail_pct", measured_if(v.tail_pct)}};
  j["warnings"] = v.warnings;
  j["simulate_wall_s"] = v.simulate_s;
  j["wall_s"] = v.total_s;
  return j;
}

std::string validate_table(const ValidateOutcome& v) {
  std::string out;
  char buf[4096];  // the calibration path and the launch command can be long
  const Comparison& c = v.comparison;
  std::snprintf(buf, sizeof buf,
                "validate    %s\ncalibration %s%s\nexecuted    %s\n\nstep time   predicted %.4g s, measured %.4g s: error %+.1f%%\n"
                "per op      MAPE %.1f%% over %lld ops (communication timed from when its last participant arrived)\n\n",
                v.scenario.c_str(), v.calibration.string().c_str(), v.calibration_made ? " (made now)" : "", v.launch.c_str(),
                c.predicted_step_s, c.measured_step_s, c.step_time_error_pct, c.op_mape_pct, (long long)c.ops_scored);
  out += buf;
  if (v.slow_rank >= 0) {
    std::snprintf(buf, sizeof buf,
                  "slowdown    rank %lld at %.3gx: executed with its compute ops repeated, predicted with it as a straggler\n\n",
                  (long long)v.slow_rank, v.slowdown);
    out += buf;
  }
  if (v.run_step_times_s.size() > 1) {
    const auto [lo, hi] = std::minmax_element(v.run_step_times_s.begin(), v.run_step_times_s.end());
    std::snprintf(buf, sizeof buf,
                  "runs        %zu executions in %d launch%s, step time %.4g .. %.4g s (the median-step execution compared,\n"
                  "            each op at its median over them all)\n"
                  "noise       one execution differs from another by %.1f%% per op (MAPE) and from the medians by %.1f%%;\n"
                  "            their steps spread %.1f%% (max - min over the median); their compute streams run %.1f%%\n"
                  "            longer on average than their ops' and gaps' medians (the host's tail)\n\n",
                  v.run_step_times_s.size(), v.launches, v.launches == 1 ? "" : "es", *lo, *hi, v.run_to_run_op_mape_pct,
                  v.reference_spread_pct, v.run_to_run_step_spread_pct, v.tail_pct);
    out += buf;
  }
  if (const auto& h = v.host_drift; h.executions > 0) {
    std::snprintf(buf, sizeof buf,
                  "host        the calibration executed this scenario at a median %.4g s per step (%lld steps); these\n"
                  "            executions %.4g s (%+.1f%%): how far this machine moved since it was calibrated\n\n",
                  h.calibrated_step_s, (long long)h.executions, h.measured_step_s, h.pct());
    out += buf;
  }
  out += to_table(c);
  std::snprintf(buf, sizeof buf, "\nwall time   %.1f s (calibrate %.1f s, simulate %.2f s, execute %.1f s)\n", v.total_s, v.calibrate_s,
                v.simulate_s, v.execute_s);
  out += buf;
  return out;
}

}  // namespace paralab::calib
