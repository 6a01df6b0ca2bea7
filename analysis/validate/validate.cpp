// paralab — validate: calibration (cached or made), simulation, execution, comparison
// (validate.hpp).
#include "analysis/validate/validate.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

#include "analysis/host_info.hpp"
#include "analysis/launch.hpp"
#include "analysis/stats.hpp"
#include "analysis/validate/reference_runs.hpp"
#include "ir/error.hpp"
#include "ir/scenario_loader.hpp"
#include "results/comm_alignment.hpp"
#include "sim/simulate.hpp"

namespace paralab::calib {

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

namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

// `paralab calibrate SCENARIO --out FILE` as a child (it launches its own ranks); its progress
// lines go to opts.progress. Throws std::runtime_error with the end of its output when it fails.
void make_calibration(const ValidateOptions& opts, const std::filesystem::path& exe, const std::filesystem::path& out) {
  std::filesystem::create_directories(out.parent_path());
  std::vector<std::string> cmd = {exe.string(), "calibrate", opts.scenario.string(), "--backend", opts.backend, "--out", out.string(),
                                  "--progress-lines"};
  if (opts.quick_calibration) cmd.push_back("--quick");
  for (const auto& x : opts.sets) cmd.insert(cmd.end(), {"--set", x});
  std::vector<std::string> err;
  const ProcessResult r = run_process(cmd, {}, [&](const std::string& line) {
    double f = 0;
    std::string what;
    if (parse_progress_line(line, f, what)) {
      if (opts.progress) opts.progress(f, what);
      return;
    }
    err.push_back(line);
  }, opts.timeout_s);
  if (r.exit_code != 0)
    throw std::runtime_error("paralab calibrate failed (exit code " + std::to_string(r.exit_code) + (r.timed_out ? ", timed out" : "") +
                             "):\n" + last_lines(err, 20));
}

// Each compute-stream op's span in one execution: from the end of the op before it on its
// rank's compute stream (the rank's start for the first) to its own end, its time and the gap
// before it. A rank's compute stream runs them one after another through the step.
void add_compute_spans(const StepResult& r, const StepIR& ir, RunDurations& spans) {
  std::map<int64_t, std::vector<const OpTiming*>> by_rank;
  for (const OpTiming& t : r.ops)
    if (ir.graph_for(t.rank).op(t.op).stream == Stream::compute) by_rank[t.rank].push_back(&t);
  for (auto& [rank, ops] : by_rank) {
    std::sort(ops.begin(), ops.end(), [](const OpTiming* a, const OpTiming* b) { return a->start_us < b->start_us; });
    double prev = ops.empty() ? 0.0 : ops.front()->start_us;
    for (const OpTiming* t : ops) {
      spans[{rank, t->op}].push_back(t->end_us - prev);
      prev = t->end_us;
    }
  }
}

// How much longer the compute streams run on average than their spans' medians (%): the host's
// tail (preemptions, a peer's late arrival), which a model of typical op times does not carry.
double tail_pct(const RunDurations& spans, int runs) {
  double mean = 0, med = 0;
  for (const auto& [key, d] : spans) {
    if (d.size() != static_cast<size_t>(runs)) continue;
    double sum = 0;
    for (double x : d) sum += x;
    mean += sum / static_cast<double>(d.size());
    med += median(d);
  }
  return med > 0 ? 100.0 * (mean / med - 1.0) : 0.0;
}

// The reference: each op at its upper median over the executions (communication timed from its
// last arrival), from its start in the median-step execution: what compare scores op by op. Its
// figures (step, breakdown) are that execution's own, as executed.
LoadedResult reference(const ReferenceRuns& refs, const StepIR& ir, RunDurations& durations, RunDurations& compute_spans) {
  const std::vector<double>& steps = refs.step_times_s();
  std::vector<int> order(steps.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return steps[static_cast<size_t>(a)] < steps[static_cast<size_t>(b)]; });
  const int chosen = order[(order.size() - 1) / 2];
  LoadedResult posted;
  for (int run = 0; run < refs.count(); ++run) {
    LoadedResult r = read_result(refs.trace(run));
    if (run == chosen) posted = r;
    add_compute_spans(r.result, ir, compute_spans);
    align_comm_starts(r.result, ir);
    for (const OpTiming& t : r.result.ops) durations[{t.rank, t.op}].push_back(t.end_us - t.start_us);
  }
  LoadedResult aligned = posted;
  align_comm_starts(aligned.result, ir);
  for (OpTiming& t : aligned.result.ops) t.end_us = t.start_us + upper_median(durations.at({t.rank, t.op}));
  finalize(posted.result, ir);  // the median-step execution's own figures
  posted.result.ops.swap(aligned.result.ops);
  return posted;
}

void warn(ValidateOutcome& v, const ValidateOptions& opts, std::string w) {
  if (opts.log) opts.log(w);
  v.warnings.push_back(std::move(w));
}

// Where the executions' own spread or the host's drift bounds the result.
void noise_warnings(ValidateOutcome& v, const ValidateOptions& opts) {
  char buf[512];
  const double step_err = std::abs(v.comparison.step_time_error_pct);
  if (v.runs > 1 && step_err <= v.run_to_run_step_spread_pct) {
    std::snprintf(buf, sizeof buf,
                  "note: the step error (%+.1f%%) is within the executions' own spread (%.1f%% from fastest to slowest step): "
                  "this host's noise bounds it",
                  v.comparison.step_time_error_pct, v.run_to_run_step_spread_pct);
    warn(v, opts, buf);
  }
  if (v.runs > 1 && v.tail_pct > 1.0 && v.comparison.step_time_error_pct < 0 &&
      -v.comparison.step_time_error_pct <= v.tail_pct + v.run_to_run_step_spread_pct) {
    std::snprintf(buf, sizeof buf,
                  "note: these executions' compute streams run %.1f%% longer on average than their ops' and gaps' medians "
                  "(the host's tail: preemptions, peers arriving late), which a model of typical op times does not carry; "
                  "the step error (%+.1f%%) is within that and the executions' spread",
                  v.tail_pct, v.comparison.step_time_error_pct);
    warn(v, opts, buf);
  }
  if (v.runs > 1 && v.comparison.op_mape_pct <= v.reference_spread_pct) {
    std::snprintf(buf, sizeof buf,
                  "note: the op MAPE (%.1f%%) is within one execution's distance from the executions' medians (%.1f%%): this "
                  "host's noise bounds it",
                  v.comparison.op_mape_pct, v.reference_spread_pct);
    warn(v, opts, buf);
  }
  if (v.host_drift.executions > 0 && std::abs(v.host_drift.pct()) > ValidateOutcome::kHostDriftWarnPct) {
    std::snprintf(buf, sizeof buf,
                  "warning: these executions' median step (%.4g s) is %+.1f%% from the calibration's own (%.4g s): the machine "
                  "moved since it was calibrated, and a step error of that size is the host's, not the model's",
                  v.host_drift.measured_step_s, v.host_drift.pct(), v.host_drift.calibrated_step_s);
    warn(v, opts, buf);
  }
}

}  // namespace

ValidateOutcome validate(const ValidateOptions& opts) {
  const auto t0 = clock_type::now();
  ValidateOutcome v;
  const Scenario s = load_scenario(opts.scenario, opts.sets);
  v.scenario = s.name;
  if (opts.slow_rank >= s.world_size() || opts.slow_rank < -1)
    throw ConfigError(SourceLoc{"command line", 0, 0}, "--slow-rank", std::to_string(opts.slow_rank), "no such rank",
                      "a rank of the layout, 0 .. " + std::to_string(s.world_size() - 1));
  v.slow_rank = opts.slow_rank;
  v.slowdown = opts.slow_rank >= 0 ? opts.slowdown : 1.0;
  const std::filesystem::path exe = opts.paralab.empty() ? self_executable() : opts.paralab;
  std::filesystem::create_directories(opts.work_dir);
  ReferenceRuns refs(opts, s.world_size(), exe);
  v.launch = refs.command_line();

  // 1. Calibration.
  bool make = false;
  if (!opts.calibration.empty()) {
    if (!std::filesystem::is_regular_file(opts.calibration))
      throw ConfigError(SourceLoc{"command line", 0, 0}, "--calibration", opts.calibration.string(), "no such file",
                        "a topology file, as `paralab calibrate --out FILE` writes");
    v.calibration = opts.calibration;
  } else {
    v.calibration = cached_calibration_path(s, opts.backend);
    make = opts.recalibrate || !std::filesystem::is_regular_file(v.calibration);
    if (!make && opts.log) opts.log("calibration: " + v.calibration.string() + " (cached)");
  }
  std::vector<std::string> calibrated_sets = opts.sets;
  calibrated_sets.push_back("cluster.topology=" + std::filesystem::absolute(v.calibration).string());
  if (!make) (void)load_scenario(opts.scenario, calibrated_sets);  // a bad file is refused before minutes of executions
  if (make) {
    const auto tc = clock_type::now();
    if (opts.log) opts.log("calibrating this machine for '" + s.name + "' (once; cached in " + v.calibration.string() + ")");
    make_calibration(opts, exe, v.calibration);
    v.calibration_made = true;
    v.calibrate_s = since(tc);
  }

  // 2. Simulate on the calibrated topology.
  const auto ts = clock_type::now();
  Scenario sc = load_scenario(opts.scenario, calibrated_sets);
  if (opts.slow_rank >= 0) {
    Straggler slow;
    slow.rank = opts.slow_rank;
    slow.slowdown = opts.slowdown;
    sc.variation.stragglers.push_back(slow);
  }
  // The calibration's own executions ran unslowed: against a slowed one they say nothing of drift.
  for (const ExecutionPoint& e : sc.topology.calibration.executions)
    if (e.digest == scenario_digest(s) && opts.slow_rank < 0) {
      v.host_drift.executions = e.executions;
      v.host_drift.calibrated_step_s = e.step_median_s;
    }
  {
    const StepIR ir = build_step_ir(sc);
    const sim::Simulation sim = sim::simulate(ir);
    const std::filesystem::path p = opts.work_dir / "predicted.json";
    std::ofstream(p) << trace_json(sim.result, ir);
    v.predicted = read_result(p);
  }
  v.simulate_s = since(ts);
  if (opts.log) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "simulated: %.4g s per step on %s (%.2f s)", v.predicted.result.step_time_s, sc.topology.name.c_str(),
                  v.simulate_s);
    opts.log(buf);
  }

  // 3. Execute.
  refs.run();
  v.execute_s = refs.seconds();
  v.runs = refs.count();
  v.launches = refs.launches();
  v.run_step_times_s = refs.step_times_s();
  for (const std::string& w : refs.warnings()) v.warnings.push_back(w);

  // 4. Compare against the reference.
  const StepIR ir = build_step_ir(s);
  RunDurations durations, spans;
  v.measured = reference(refs, ir, durations, spans);
  const double median_step = median(v.run_step_times_s);
  if (v.runs > 1 && median_step > 0) {
    const auto [lo, hi] = std::minmax_element(v.run_step_times_s.begin(), v.run_step_times_s.end());
    v.run_to_run_step_spread_pct = 100.0 * (*hi - *lo) / median_step;
    v.run_to_run_op_mape_pct = run_to_run_mape_pct(durations, v.runs);
    v.reference_spread_pct = reference_spread_pct(durations, v.runs);
    v.tail_pct = tail_pct(spans, v.runs);
  }
  v.host_drift.measured_step_s = median_step;
  v.measured_summary = refs.summary(v.launches - 1);
  const nlohmann::json figures = summary_json(v.measured.result);  // kept alive through the loop
  for (const auto& [key, value] : figures.items()) v.measured_summary[key] = value;
  std::ofstream(opts.work_dir / "measured.json") << trace_json(v.measured.result, ir);
  v.comparison = compare(v.predicted, v.measured, 10);
  noise_warnings(v, opts);
  v.total_s = since(t0);
  return v;
}

}  // namespace paralab::calib
