// paralab validate — simulate, execute and compare a scenario in one go (docs/calibration.md).
//
//   paralab validate scenarios/quickstart.toml --backend cpu --report report.html
//
// Without --calibration it uses the calibration cached for this host, scenario and paralab
// build, or makes one (`paralab calibrate`, once). It launches the execution itself
// (`mpirun -np N paralab execute ...` when the scenario has N > 1 ranks).

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "analysis/launch.hpp"
#include "analysis/validate/report.hpp"
#include "analysis/temp_dir.hpp"
#include "analysis/validate/validate.hpp"
#include "apps/cli.hpp"
#include "apps/commands.hpp"

namespace paralab::cli {

namespace {

const std::vector<OptionSpec> kOptions = {
    {"--backend", true, "cpu | cuda (default cpu)"},
    {"--calibration", true, "a calibrated topology (paralab calibrate --out); default: cached or made now"},
    {"--recalibrate", false, "make a new calibration even if one is cached"},
    {"--quick-calibration", false, "when a calibration is made: calibrate --quick (faster, coarser)"},
    {"--report", true, "write an HTML report (timelines side by side, per-op scatter) to FILE"},
    {"--out-dir", true, "keep the traces in DIR: predicted.json, measured-K.json per execution, measured.json as compared (default: a temporary directory)"},
    {"--steps", true, "most steps a launch measures after its warm-up, each an execution, as many as fit in 0.4 s (default 8; 1: one)"},
    {"--warmup", true, "seconds of warm-up steps per launch before them (at least one step; default 0.5; 0: none)"},
    {"--runs", true, "launches; the median-step execution of them all is compared, each op at its median over them all (default: 3-15, ~30 s)"},
    {"--timeout", true, "seconds any child (calibrate, execute) may take (default 3600)"},
    {"--slow-rank", true, "with --slowdown: execute with rank R's compute ops run F times, and predict it as a straggler"},
    {"--slowdown", true, "F in [1, 100] (execute --slowdown); the calibration stays the machine's, unslowed"},
    {"--help", false, "this help"},
};

int parse_int(const std::string& opt, const std::string& v, int lo, int hi) {
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (end == v.c_str() || *end || x < lo || x > hi)
    throw UsageError(opt + " needs a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + v + "'");
  return static_cast<int>(x);
}

}  // namespace

int run_validate(int argc, char** argv) {
  Args a;
  calib::ValidateOptions o;
  std::optional<calib::TempDir> tmp;  // the work directory when --out-dir is not given
  try {
    a = parse(argc, argv, 1, kOptions);
    if (a.flag("--help")) {
      std::printf("usage: paralab validate SCENARIO --backend cpu|cuda [options]\n"
                  "  Simulates SCENARIO on a calibrated topology of this machine, executes it (launching mpirun\n"
                  "  itself), and compares step time and every op. Calibrations are cached under %s.\n%s",
                  (calib::cache_dir() / "calibration").string().c_str(), options_help(kOptions).c_str());
      return 0;
    }
    o.scenario = a.require_positional(0, "SCENARIO");
    o.sets = a.sets;
    o.backend = a.value("--backend").value_or("cpu");
    if (o.backend != "cpu" && o.backend != "cuda") throw UsageError("--backend must be cpu or cuda, got '" + o.backend + "'");
    if (auto c = a.value("--calibration")) o.calibration = *c;
    o.recalibrate = a.flag("--recalibrate");
    o.quick_calibration = a.flag("--quick-calibration");
    if (auto s = a.value("--steps")) o.steps = parse_int("--steps", *s, 1, 100);
    if (auto w = a.value("--warmup")) o.warmup_s = parse_number("--warmup", *w, 0, 3600);
    if (auto r = a.value("--runs")) o.runs = parse_int("--runs", *r, 1, 100);
    if (auto t = a.value("--timeout")) o.timeout_s = parse_int("--timeout", *t, 1, 7 * 24 * 3600);
    const auto slow_rank = a.value("--slow-rank"), slowdown = a.value("--slowdown");
    if (slowdown && !slow_rank) throw UsageError("--slowdown needs --slow-rank R, the rank to slow");
    if (slow_rank && !slowdown) throw UsageError("--slow-rank needs --slowdown F, how much slower (F >= 1)");
    if (slow_rank) {
      o.slow_rank = parse_int("--slow-rank", *slow_rank, 0, 1 << 30);  // the layout's bound: validate()
      o.slowdown = parse_number("--slowdown", *slowdown, 1, 100);
    }
    if (calib::launcher_size() > 0) throw UsageError("run validate without mpirun: it launches the ranks itself");
    check_outputs(a, {"--report"});
  } catch (const UsageError& e) {
    std::fprintf(stderr, "paralab validate: %s\nusage: paralab validate SCENARIO --backend cpu|cuda [options]\n", e.what());
    return 2;
  }
  if (auto d = a.value("--out-dir")) {
    o.work_dir = *d;
  } else {
    try {
      o.work_dir = tmp.emplace("paralab-validate").path();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "paralab validate: error: %s\n", e.what());
      return 1;
    }
  }
  calib::ProgressBar bar("calibrate");
  o.log = [&](const std::string& s) {
    bar.done();
    std::fprintf(stderr, "%s\n", s.c_str());
  };
  o.progress = [&](double f, const std::string& what) { bar.update(f, what); };
  int status = 0;
  try {
    const calib::ValidateOutcome v = calib::validate(o);
    bar.done();
    if (auto r = a.value("--report")) {
      ReportInfo info;
      info.title = "paralab validate: " + v.scenario;
      info.notes = {"backend " + o.backend + "; calibration " + v.calibration.string(),
                    "executed: " + v.launch,
                    "communication ops are timed from when their last participant arrived, as the simulator times them"};
      write_file_atomic(*r, html_report(v.predicted, v.measured, v.comparison, info));
    }
    if (a.flag("--json")) std::printf("%s\n", calib::validate_json(v).dump(2).c_str());
    else std::printf("%s", calib::validate_table(v).c_str());
  } catch (const ConfigError& e) {
    bar.done();
    std::fprintf(stderr, "paralab validate: error: %s\n", e.what());
    status = 2;
  } catch (const std::exception& e) {
    bar.done();
    std::fprintf(stderr, "paralab validate: error: %s\n", e.what());
    status = 1;
  }
  return status;
}

}  // namespace paralab::cli
