// paralab — validate: calibration (cached), simulation, execution, comparison.
#include "analysis/validate.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>

#include "analysis/calibrate.hpp"
#include "analysis/validate_calibration.hpp"
#include "analysis/comm_speeds.hpp"
#include "analysis/launch.hpp"
#include "analysis/reference_runs.hpp"
#include "analysis/run_noise.hpp"
#include "results/comm_alignment.hpp"
#include "ir/error.hpp"
#include "ir/scenario_loader.hpp"
#include "sim/simulate.hpp"

namespace paralab::calib {

// ---- Compute busy time ------------------------------------------------------------------------

namespace {

// Each rank's compute busy time in one run: its breakdown's (Breakdown::compute_s).
void add_compute_busy(const StepResult& r, const StepIR& ir, std::vector<double>& out) {
  for (const RankStats& rs : r.ranks) out.push_back(rank_breakdown(ir, rs.rank, r.ops).compute_s);
}

// The spread of the measured busy times (one per rank and run) beside the prediction's (its
// breakdown's mean over stages). The median is the lower middle sample, a rank-run that
// happened (2 ranks give an even count; an interpolated quantile would report a time no rank
// spent).
ValidateOutcome::ComputeBusy busy_summary(std::vector<double> measured, const StepResult& predicted) {
  ValidateOutcome::ComputeBusy b;
  b.predicted_s = predicted.breakdown.compute_s;
  if (measured.empty()) return b;
  std::sort(measured.begin(), measured.end());
  b.min_s = measured.front();
  b.median_s = measured[(measured.size() - 1) / 2];
  b.max_s = measured.back();
  b.samples = measured.size();
  return b;
}

}  // namespace

// ---- Cache ------------------------------------------------------------------------------------------

std::filesystem::path cache_dir() {
  if (const char* e = std::getenv("PARALAB_CACHE_DIR"); e && *e) return e;
  if (const char* e = std::getenv("XDG_CACHE_HOME"); e && *e) return std::filesystem::path(e) / "paralab";
  if (const char* e = std::getenv("HOME"); e && *e) return std::filesystem::path(e) / ".cache" / "paralab";
  return std::filesystem::temp_directory_path() / ("paralab-cache-" + std::to_string(getuid()));
}

std::filesystem::path cached_calibration_path(const Scenario& s, const std::string& backend) {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0 || !*host) std::snprintf(host, sizeof host, "localhost");
  std::string digest = scenario_digest(s);
  if (digest.size() > 12) digest.resize(12);
  std::string version = paralab_version();
  for (char& c : version)
    if (c == '+' || c == '/') c = '-';
  return cache_dir() / "calibration" / host /
         (backend + "-np" + std::to_string(s.world_size()) + "-" + s.name + "-" + digest + "-" + version + ".toml");
}

// ---- Validate ---------------------------------------------------------------------------------------

namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

}  // namespace

ValidateOutcome validate(const ValidateOptions& opts) {
  const auto t0 = clock_type::now();
  auto log = [&](const std::string& s) {
    if (opts.log) opts.log(s);
  };
  ValidateOutcome v;
  const Scenario s = load_scenario(opts.scenario, opts.sets);
  v.scenario = s.name;
  const int64_t N = s.world_size();
  const std::filesystem::path exe = opts.paralab.empty() ? self_executable() : opts.paralab;
  std::filesystem::create_directories(opts.work_dir);
  ReferenceRuns refs(opts, N, exe);
  v.launch = refs.command_line();

  // 1. Calibration, and 3. the reference executions. A calibration made now executes the
  // scenario in situ over several launches; with opts.interleave (the default), those
  // launches run between blocks of the reference's executions (the earlier ones as `calibrate
  // --in-situ-only` jobs, the measuring job last with their traces), so that the machine's pace
  // over these minutes is in both.
  bool make = false;
  if (!opts.calibration.empty()) {
    if (!std::filesystem::is_regular_file(opts.calibration))
      throw ConfigError(SourceLoc{"command line", 0, 0}, "--calibration", opts.calibration.string(), "no such file",
                        "a topology file, as `paralab calibrate --out FILE` writes");
    v.calibration = opts.calibration;
  } else {
    v.calibration = cached_calibration_path(s, opts.backend);
    make = opts.recalibrate || !std::filesystem::is_regular_file(v.calibration);
    if (!make) log("calibration: " + v.calibration.string() + " (cached)");
  }
  // The scenario on that calibration, loaded before anything runs: a file that is not a valid
  // topology is bad input (ConfigError naming its line and key), refused before minutes of
  // executions rather than after them.
  std::vector<std::string> calibrated_sets = opts.sets;
  calibrated_sets.push_back("cluster.topology=" + std::filesystem::absolute(v.calibration).string());
  std::optional<Scenario> calibrated;
  if (!make) calibrated = load_scenario(opts.scenario, calibrated_sets);
  if (make) {
    make_calibration(opts, exe, s, refs, v, log);  // validate_calibration.hpp
    v.calibration_made = true;
  }
  if (refs.count() == 0) refs.run_block(0, 1);

  // 2. Simulate on the calibrated topology.
  std::vector<CallPoint> calibrated_calls;
  std::optional<InSample> own_fit;  // the prediction against the calibration's own executions
  {
    const auto ts = clock_type::now();
    const Scenario sc = calibrated ? std::move(*calibrated) : load_scenario(opts.scenario, calibrated_sets);
    const std::string digest = scenario_digest(s);
    // Its per-class call times describe this scenario's calls only when it executed nothing else.
    if (sc.topology.calibration.executions.size() == 1 && sc.topology.calibration.executions[0].digest == digest)
      calibrated_calls = sc.topology.calibration.calls;
    const ExecutionPoint* own = own_executions(sc);
    if (own) {
      v.host_drift.executions = own->executions;
      v.host_drift.launches = own->launches;
      v.host_drift.calibrated_step_s = own->step_fast_s;
      v.host_drift.calibrated_median_s = own->step_median_s;
      v.host_drift.calibrated_min_s = own->step_min_s;
      v.host_drift.calibrated_max_s = own->step_max_s;
    }
    const StepIR ir = build_step_ir(sc);
    const sim::Simulation sim = sim::simulate(ir);
    if (own) own_fit = InSample{*own, sim.result.step_time_s};
    const std::filesystem::path p = opts.work_dir / "predicted.json";
    std::ofstream(p) << trace_json(sim.result, ir);
    v.predicted = read_result(p);
    v.simulate_s = since(ts);
    char buf[160];
    std::snprintf(buf, sizeof buf, "simulated: %.4g s per step on %s (%.2f s)", sim.result.step_time_s,
                  sc.topology.name.c_str(), v.simulate_s);
    log(buf);
  }

  // The reference: the fastest half of the runs, the machine's own pace (run_noise.hpp,
  // fastest_half); the run with that half's median step is compared, its ops at their medians
  // over the runs centred on it (centred_fast_half), as the calibration's in-situ figures are
  // its executions' (below).
  v.execute_s = refs.seconds();
  v.runs = refs.count();
  v.launches = refs.launches();
  v.run_step_times_s = refs.step_times_s();
  v.run_launch = refs.launch_of();
  const std::vector<int> compared_set = centred_fast_half(v.run_step_times_s);
  v.compared_runs = static_cast<int>(compared_set.size());
  const int chosen = compared_set[compared_set.size() / 2];
  const double compared_step = v.run_step_times_s[static_cast<size_t>(chosen)];
  std::vector<double> sorted = v.run_step_times_s;
  std::sort(sorted.begin(), sorted.end());
  const double median_step = sorted[(sorted.size() - 1) / 2];
  if (v.runs > 1 && median_step > 0) v.run_to_run_step_spread_pct = 100.0 * (sorted.back() - sorted.front()) / median_step;
  if (auto& h = v.host_drift; h.executions > 0) {
    h.measured_step_s = compared_step;
    h.measured_median_s = median_step;
    if (std::abs(h.pct_of(compared_step)) > ValidateOutcome::kHostDriftWarnPct) {
      char buf[384];
      std::snprintf(buf, sizeof buf,
                    "warning: these runs' fastest half (median step %.4g s) is %+.1f%% from the calibration's executions' "
                    "(%.4g s): the machine moved since it was calibrated, and a step error of that size is the "
                    "host's, not the model's (run again on a quiet machine, or --recalibrate)",
                    compared_step, h.pct_of(compared_step), h.calibrated_step_s);
      log(buf);
      v.warnings.emplace_back(buf);
    }
    if (std::string w = own_fit ? in_sample_warning(*own_fit, opts.in_sample_bound_pct) : ""; !w.empty()) {
      log(w);
      v.warnings.push_back(std::move(w));
    }
  }
  v.warnings.insert(v.warnings.end(), refs.warnings().begin(), refs.warnings().end());
  v.measured = read_result(refs.trace(chosen));
  // Its launch's summary (loss, memory, phases), with the figures of the step compared.
  v.measured_summary = refs.summary(v.run_launch[static_cast<size_t>(chosen)]);
  const nlohmann::json compared_step_summary = summary_json(v.measured.result);
  for (const auto& [key, value] : compared_step_summary.items()) v.measured_summary[key] = value;

  // 4. Compare, communication timed as simulated; with several runs every op takes its median
  // duration over the runs (from its start in the compared run).
  {
    const StepIR ir = build_step_ir(s);
    std::vector<double> busy_s;  // per rank and run
    add_compute_busy(v.measured.result, ir, busy_s);
    v.comm_ops_aligned = align_comm_starts(v.measured.result, ir);
    if (v.runs > 1) {
      // Every run for the noise figures (in run order), the centred fast half for the medians.
      RunDurations durations, compared;
      std::vector<bool> in_set(static_cast<size_t>(v.runs), false);
      for (const int k : compared_set) in_set[static_cast<size_t>(k)] = true;
      for (int run = 0; run < v.runs; ++run) {
        LoadedResult r = run == chosen ? v.measured : read_result(refs.trace(run));
        const bool counted = in_set[static_cast<size_t>(run)];
        if (run != chosen) {
          if (counted) add_compute_busy(r.result, ir, busy_s);
          align_comm_starts(r.result, ir);
        }
        for (const OpTiming& t : r.result.ops) {
          durations[{t.rank, t.op}].push_back(t.end_us - t.start_us);
          if (counted) compared[{t.rank, t.op}].push_back(t.end_us - t.start_us);
        }
      }
      v.run_to_run_op_mape_pct = run_to_run_mape_pct(durations, v.runs);
      v.split_half_op_mape_pct = split_half_mape_pct(durations, v.runs, v.run_launch);
      v.comm_speeds = comm_two_speeds(durations, comm_classes(v.measured), v.run_launch);
      for (OpTiming& t : v.measured.result.ops) t.end_us = t.start_us + upper_median(compared.at({t.rank, t.op}));
    }
    v.compute_busy = busy_summary(std::move(busy_s), v.predicted.result);
    // The measurement compared, for `paralab compare` of another prediction against it.
    std::ofstream(opts.work_dir / "measured.json") << trace_json(v.measured.result, ir);
  }
  v.comparison = compare(v.predicted, v.measured, 10);
  if (v.halves() && v.split_half_op_mape_pct > ValidateOutcome::kReferenceNoiseWarnPct) {
    char buf[384];
    std::snprintf(buf, sizeof buf,
                  "warning: the per-op medians of the even and the odd runs differ by %.1f%% (MAPE), beyond %.0f%%: this "
                  "machine does not reproduce its own per-op times that closely, and an op MAPE of that size cannot be "
                  "told from its run-to-run noise (run again on a quiet machine)",
                  v.split_half_op_mape_pct, ValidateOutcome::kReferenceNoiseWarnPct);
    log(buf);
    v.warnings.emplace_back(buf);
  }
  v.calls_since_calibration = calls_since_calibration(v.measured, calibrated_calls);
  auto warn = [&](std::string w) {
    log(w);
    v.warnings.push_back(std::move(w));
  };
  for (const CallsSinceCalibration& c : v.calls_since_calibration)
    if (c.drifted()) warn(call_drift_warning(c));
  for (const CommSpeeds& c : v.comm_speeds) warn(two_speeds_warning(c));
  v.total_s = since(t0);
  return v;
}

nlohmann::json validate_json(const ValidateOutcome& v) {
  nlohmann::json j;
  j["scenario"] = v.scenario;
  j["predicted"] = summary_json(v.predicted.result);
  j["measured"] = v.measured_summary.is_null() ? summary_json(v.measured.result) : v.measured_summary;
  j["step_time_error_pct"] = v.comparison.step_time_error_pct;
  j["op_mape_pct"] = v.comparison.op_mape_pct;
  j["comparison"] = to_json(v.comparison);
  j["calibration"] = {{"file", v.calibration.string()},
                      {"made_now", v.calibration_made},
                      {"wall_s", v.calibrate_s},
                      {"in_sample_pct", v.calibration_in_sample_pct}};
  if (const auto& h = v.host_drift; h.executions > 0)
    j["calibration"]["executed"] = {{"executions", h.executions},
                                    {"launches", h.launches},
                                    {"interleaved", h.interleaved},
                                    {"step_fast_s", h.calibrated_step_s},
                                    {"step_median_s", h.calibrated_median_s},
                                    {"step_min_s", h.calibrated_min_s},
                                    {"step_max_s", h.calibrated_max_s},
                                    {"measured_step_fast_s", h.measured_step_s},
                                    {"measured_step_median_s", h.measured_median_s},
                                    {"host_drift_pct", h.pct_of(h.measured_step_s)},
                                    {"predicted_error_pct", h.pct_of(v.predicted.result.step_time_s)},
                                    {"calls", nlohmann::json::array()}};
  for (const CallsSinceCalibration& c : v.calls_since_calibration)
    j["calibration"]["executed"]["calls"].push_back(
        {{"class", c.cls}, {"ops", c.ops}, {"executed_us", c.calibrated_us}, {"measured_us", c.measured_us}});
  // A noise figure that needs more runs than were made is null, not 0: 0 would read as "no noise".
  auto measured_if = [](bool made, double pct) { return made ? nlohmann::json(pct) : nlohmann::json(nullptr); };
  j["execute"] = {{"command", v.launch},
                  {"runs", v.runs},
                  {"launches", v.launches},
                  {"compared_runs", v.compared_runs},
                  {"runs_step_time_s", v.run_step_times_s},
                  {"runs_launch", v.run_launch},
                  {"wall_s", v.execute_s},
                  {"comm_ops_aligned", v.comm_ops_aligned},
                  {"run_to_run_op_mape_pct", measured_if(v.runs >= 2, v.run_to_run_op_mape_pct)},
                  {"run_to_run_step_spread_pct", measured_if(v.runs >= 2, v.run_to_run_step_spread_pct)},
                  {"split_half_op_mape_pct", measured_if(v.halves(), v.split_half_op_mape_pct)},
                  {"comm_two_speeds", nlohmann::json::array()}};
  for (const CommSpeeds& c : v.comm_speeds)
    j["execute"]["comm_two_speeds"].push_back({{"class", c.cls},
                                               {"ops_per_run", c.ops},
                                               {"fast_launches", c.fast_launches},
                                               {"fast_us", c.fast_us},
                                               {"slow_launches", c.slow_launches},
                                               {"slow_us", c.slow_us}});
  if (const auto& b = v.compute_busy; b.samples > 0) {
    j["execute"]["compute_per_rank_s"] = {
        {"predicted", b.predicted_s}, {"min", b.min_s}, {"median", b.median_s}, {"max", b.max_s}, {"samples", b.samples}};
    const bool spread = b.samples >= 2 && b.median_s > 0;
    j["execute"]["run_to_run_compute_spread_pct"] = measured_if(spread, spread ? 100.0 * (b.max_s - b.min_s) / b.median_s : 0.0);
  }
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
  if (v.calibration_in_sample_pct.size() > 1) {
    out += "calibrated  " + std::to_string(v.calibration_in_sample_pct.size()) +
           " times, its predictions of its own executions of the scenario";
    for (double pct : v.calibration_in_sample_pct) {
      std::snprintf(buf, sizeof buf, std::isnan(pct) ? " (none executed)" : " %+.1f%%", pct);
      out += buf;
    }
    out += ": the least at odds kept\n\n";
  }
  if (v.run_step_times_s.size() > 1) {
    std::vector<double> st = v.run_step_times_s;
    std::sort(st.begin(), st.end());
    // One compared run (a fast half of 1 or 2: the fastest) is its own reference op by op.
    const std::string compared =
        v.compared_runs == 1 ? "the fastest compared, op by op)"
                             : "the fastest " + std::to_string(v.compared_runs) +
                                   " compared: the run\n            with their median step, each op at its median over them)";
    std::snprintf(buf, sizeof buf, "runs        %zu executions in %d launch%s, step time %.4g .. %.4g s (", st.size(),
                  v.launches, v.launches == 1 ? "" : "es", st.front(), st.back());
    out += buf;
    out += compared;
    std::snprintf(buf, sizeof buf,
                  "\nnoise       the executions differ from each other by %.1f%% per op (MAPE) and %.1f%% in step time\n"
                  "            (max - min over the median); a single execution is that noisy a reference\n\n",
                  v.run_to_run_op_mape_pct, v.run_to_run_step_spread_pct);
    out += buf;
  }
  if (v.halves()) {
    std::snprintf(buf, sizeof buf,
                  "reference   the per-op medians of the even and the odd %s differ by %.1f%% (MAPE): a per-op\n"
                  "            error below that is within what the reference reproduces to\n\n",
                  v.launches < v.runs ? "launches' runs" : "runs", v.split_half_op_mape_pct);
    out += buf;
  }
  if (const auto& b = v.compute_busy; b.samples > 0) {
    std::snprintf(buf, sizeof buf,
                  "compute     busy per rank %.4g s predicted; measured %.4g s (median of %zu ranks x compared runs, %.4g .. %.4g s)\n"
                  "            how fast this machine computed while executing, against its calibration\n\n",
                  b.predicted_s, b.median_s, b.samples, b.min_s, b.max_s);
    out += buf;
  }
  if (const auto& h = v.host_drift; h.executions > 0) {
    std::snprintf(buf, sizeof buf,
                  "host        the calibration executed this scenario at %.4g s per step (its fastest half's median; %lld\n"
                  "            executions in %lld launch%s%s, %.4g .. %.4g s, median %.4g s); these runs %.4g s (%+.1f%%;\n"
                  "            median %.4g s): how far this machine moved since it was calibrated; the prediction is\n"
                  "            %+.1f%% from the calibration's executions (in-sample: the model without that drift)\n\n",
                  h.calibrated_step_s, (long long)h.executions, (long long)h.launches, h.launches == 1 ? "" : "es",
                  h.interleaved ? ", between these runs" : "", h.calibrated_min_s, h.calibrated_max_s, h.calibrated_median_s,
                  h.measured_step_s, h.pct_of(h.measured_step_s), h.measured_median_s,
                  h.pct_of(v.predicted.result.step_time_s));
    out += buf;
  }
  out += comm_speed_table(v.calls_since_calibration, v.comm_speeds);
  out += to_table(c);
  std::snprintf(buf, sizeof buf, "\nwall time   %.1f s (calibrate %.1f s, simulate %.2f s, execute %.1f s)\n", v.total_s, v.calibrate_s,
                v.simulate_s, v.execute_s);
  out += buf;
  return out;
}

}  // namespace paralab::calib
