// paralab — the calibration validate makes (semantics in validate_calibration.hpp).
#include "analysis/validate_calibration.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <stdexcept>

#include "analysis/in_sample.hpp"
#include "analysis/launch.hpp"
#include "analysis/temp_dir.hpp"

namespace paralab::calib {

namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

// A calibration made now: its distance from its own executions (NaN: it executed none).
void record(ValidateOutcome& v, const std::optional<InSample>& s) {
  v.calibration_in_sample_pct.push_back(s ? s->pct() : std::nan(""));
}

// One `paralab calibrate` child for this scenario (`more`: its extra arguments), under
// `prefix` (a launcher, or nothing for a plain child); its progress lines go to opts.progress
// mapped into [lo, hi], its other stderr lines are kept for an error. Throws
// std::runtime_error naming `job` when it fails.
void run_calibrate(const ValidateOptions& opts, const std::filesystem::path& exe, const std::filesystem::path& out,
                   const std::vector<std::string>& prefix, const std::vector<std::string>& env,
                   const std::vector<std::string>& more, double lo, double hi, const std::string& job) {
  std::vector<std::string> cmd = prefix;
  cmd.insert(cmd.end(), {exe.string(), "calibrate", opts.scenario.string(), "--backend", opts.backend, "--out", out.string(),
                         "--progress-lines"});
  if (opts.quick_calibration) cmd.push_back("--quick");
  for (const auto& x : opts.sets) {
    cmd.push_back("--set");
    cmd.push_back(x);
  }
  cmd.insert(cmd.end(), more.begin(), more.end());
  std::vector<std::string> err;
  const ProcessResult r = run_process(cmd, env, [&](const std::string& line) {
    double f = 0;
    std::string what;
    if (parse_progress_line(line, f, what)) {
      if (opts.progress) opts.progress(lo + (hi - lo) * f, what);
      return;
    }
    err.push_back(line);
  }, opts.timeout_s);
  if (r.exit_code != 0)
    throw std::runtime_error("paralab calibrate (" + job + ") failed (exit code " + std::to_string(r.exit_code) +
                             (r.timed_out ? ", timed out" : "") + "):\n" + last_lines(err, 20));
}

// Makes the calibration again, beside the one at hand (`best`, the least at odds so far, at
// odds), and keeps whichever of the two is less at odds with its own executions: before the
// reference runs, so no later measurement chooses. The cached file is only ever replaced whole
// (a rename onto it), so an interrupted or failed attempt leaves it as it was. Returns the kept
// one's InSample.
InSample calibrate_once_more(const ValidateOptions& opts, const std::filesystem::path& exe, ValidateOutcome& v,
                             const std::vector<std::string>& spread, const InSample& best, int made,
                             const std::function<void(const std::string&)>& log) {
  char buf[384];
  std::snprintf(buf, sizeof buf,
                "calibration: its prediction is %+.1f%% from its own executions of the scenario (%.4g s against %.4g s), "
                "beyond %.3g%% (a host that stalled them now and then does that); calibrating again (%d of %d)",
                best.pct(), best.predicted_step_s, best.executions.step_fast_s, opts.in_sample_bound_pct, made + 1,
                opts.calibration_attempts);
  log(buf);
  std::filesystem::path again = v.calibration;
  again.replace_extension(".again.toml");
  std::optional<InSample> now;
  try {
    run_calibrate(opts, exe, again, {}, {}, spread, 0.0, 1.0, "calibration, again");
    now = in_sample(opts.scenario, opts.sets, again);
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove(again, ec);  // the cache keeps the one it had
    throw;
  }
  record(v, now);
  if (now && std::abs(now->pct()) < std::abs(best.pct())) {
    std::filesystem::rename(again, v.calibration);
    return *now;
  }
  std::filesystem::remove(again);
  char other[32] = "executed none";
  if (now) std::snprintf(other, sizeof other, "%+.1f%%", now->pct());
  std::snprintf(buf, sizeof buf, "calibration: the earlier one is less at odds with its executions (%+.1f%%, this one %s); kept",
                best.pct(), other);
  log(buf);
  return best;
}

}  // namespace

void make_calibration(const ValidateOptions& opts, const std::filesystem::path& exe, const Scenario& s,
                      ReferenceRuns& refs, ValidateOutcome& v, const std::function<void(const std::string&)>& log) {
  const int64_t N = s.world_size();
  const int launches = std::max(1, opts.in_situ_launches);
  std::filesystem::create_directories(v.calibration.parent_path());
  log("calibrating this machine for '" + s.name + "' (" + std::to_string(N) + " rank" + (N == 1 ? "" : "s") +
      ", once; cached in " + v.calibration.string() + ")");
  const std::vector<std::string> spread = {"--in-situ-launches", std::to_string(launches)};
  if (opts.interleave && launches > 1) {
    v.host_drift.interleaved = true;
    const TempDir traces("paralab-in-situ");
    const double pre = 0.06 * (launches - 1);  // the bar's share of the earlier launches
    double earlier_s = 0;
    for (int k = 0; k + 1 < launches; ++k) {
      const auto tl = clock_type::now();
      char name[32];
      std::snprintf(name, sizeof name, "launch-%02d", k + 1);  // name order is launch order
      std::vector<std::string> more = spread;
      more.insert(more.end(), {"--in-situ-only", (traces.path() / name).string()});
      log("calibration: in-situ launch " + std::to_string(k + 1) + " of " + std::to_string(launches));
      run_calibrate(opts, exe, v.calibration, refs.launcher().prefix, refs.launcher().env, more, pre * k / (launches - 1),
                    pre * (k + 1) / (launches - 1), "in-situ launch " + std::to_string(k + 1));
      earlier_s += since(tl);
      refs.run_block(k, launches);
    }
    const auto tm = clock_type::now();
    std::vector<std::string> more = spread;
    more.insert(more.end(), {"--in-situ-from", traces.path().string(), "--earlier-s", seconds_arg(earlier_s)});
    log("calibration: the measuring job (sweep, then in-situ launch " + std::to_string(launches) + ")");
    run_calibrate(opts, exe, v.calibration, {}, {}, more, pre, 1.0, "the measuring job");
    v.calibrate_s = earlier_s + since(tm);
    // Not made again: its launches ran between the reference's blocks, already measured.
    record(v, in_sample(opts.scenario, opts.sets, v.calibration));
    refs.run_block(launches - 1, launches);
  } else {
    const auto tc = clock_type::now();
    run_calibrate(opts, exe, v.calibration, {}, {}, spread, 0.0, 1.0, "calibration");
    std::optional<InSample> best = in_sample(opts.scenario, opts.sets, v.calibration);
    record(v, best);
    for (int made = 1; calibrate_again(best, made, opts.calibration_attempts, opts.in_sample_bound_pct); ++made)
      best = calibrate_once_more(opts, exe, v, spread, *best, made, log);
    v.calibrate_s = since(tc);
  }
}

}  // namespace paralab::calib
