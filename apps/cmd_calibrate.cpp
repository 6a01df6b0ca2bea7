// paralab calibrate — measure this machine with the executor's own code paths, fit the
// simulator's parameters and write a calibrated topology (docs/calibration.md).
//
//   paralab calibrate --backend cpu --out my-host.toml [SCENARIO ...]
//
// Run without mpirun: it starts its own ranks (`mpirun -np N paralab calibrate ...`, the launch
// `paralab validate` uses for `execute`) and draws a progress bar while they measure. Under a
// launcher it is one rank of the job.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/calibrate.hpp"
#include "analysis/in_situ_run.hpp"
#include "analysis/in_sample.hpp"
#include "analysis/launch.hpp"
#include "analysis/temp_dir.hpp"
#include "apps/cli.hpp"
#include "apps/commands.hpp"
#include "exec/error.hpp"
#include "ir/enum_names.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/topology_loader.hpp"
#if defined(PARALAB_EXEC_MPI)
#include "exec/mpi/mpi_transport.hpp"
#endif

namespace paralab::cli {

namespace {

const std::vector<OptionSpec> kOptions = {
    {"--backend", true, "cpu | cuda (default cpu): the executor backend to measure"},
    {"--out", true, "write the calibrated topology to FILE (required)"},
    {"--scenario", true, "measure exactly this scenario's ops (comma-separated list; also positional)"},
    {"--ranks", true, "ranks measuring at once (default: the scenarios' largest world size; 2 without scenarios)"},
    {"--reps", true, "timed passes per measurement (default 5)"},
    {"--base-topology", true, "topology whose values the fit replaces (default: the first scenario's, else cpu-host)"},
    {"--quick", false, "a smaller sweep and fewer sizes (tests, a first look)"},
    {"--no-sweep", false, "only the scenarios' own ops (no shape sweep)"},
    {"--no-comm", false, "skip the collective and transfer measurements"},
    {"--no-in-situ", false, "do not execute the scenarios of the job's size (replay their compute ops instead)"},
    {"--in-situ-launches", true, "launches of the job those executions spread over (default 4: each launch draws its own pace)"},
    {"--in-situ-only", true, "(internal) one earlier launch: only execute those scenarios, their traces to DIR"},
    {"--in-situ-from", true, "(internal) add the executions earlier launches traced under DIR"},
    {"--earlier-s", true, "(internal) seconds the earlier launches took (counted in the reported time)"},
    {"--in-sample-bound", true, "percent (0-100, default 10) a scenario executed in situ, simulated on the result, may be from those executions before calibrate warns"},
    {"--progress-lines", false, "(internal) print progress as lines for a parent process"},
    {"--help", false, "this help"},
};

int64_t parse_count(const std::string& opt, const std::string& v, int64_t lo, int64_t hi) {
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0' || x < lo || x > hi)
    throw UsageError(opt + " needs a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + v + "'");
  return x;
}

void print_summary(const calib::CalibrationResult& r, const std::string& out) {
  std::printf("calibrated  %s (%s backend, %d rank%s at once on %s, %d logical CPUs) in %.1f s\n", out.c_str(),
              r.backend.c_str(), r.ranks, r.ranks == 1 ? "" : "s", r.host.hostname.c_str(), r.host.cores, r.wall_s);
  std::printf("measured    %zu compute shapes (%zu GEMM), %zu communication points\n", r.compute.size(),
              static_cast<size_t>(std::count_if(r.compute.begin(), r.compute.end(), [](const calib::OpSamples& s) { return s.key.kind == OpKind::gemm; })),
              r.comm.size());
  for (const auto& [m, g] : r.gemm)
    std::printf("GEMM %-5s  %.3g GFLOP/s at rate, %.3g us per call (fit rms %.1f%% over %lld shapes)\n",
                std::string(enum_to_string(m)).c_str(), g.flop_per_us * 1e-3, g.call_us, 100 * g.fit.rms_rel_error,
                (long long)g.fit.samples);
  if (r.stream.fit.samples > 0)
    std::printf("kernels     t = %.3g us + bytes / %.3g GB/s (fit rms %.1f%% over %lld shapes); copy %.3g GB/s per rank\n",
                r.stream.latency_us, r.stream.gbps(), 100 * r.stream.fit.rms_rel_error, (long long)r.stream.fit.samples, r.copy_gbps);
  if (r.have_comm_fit)
    std::printf("comm        L %.3g us + alpha %.3g us per step + bytes / %.3g GB/s + reduced bytes / %.3g GB/s (fit rms %.1f%% "
                "over %lld calls)\n",
                r.comm_fit.launch_us, r.comm_fit.step_us, r.comm_fit.gbps(), r.comm_fit.reduce_gbps(),
                100 * r.comm_fit.fit.rms_rel_error, (long long)r.comm_fit.fit.samples);
  std::printf("use it      --set cluster.topology=%s\n", out.c_str());
}

nlohmann::json summary_json(const calib::CalibrationResult& r, const std::string& out) {
  nlohmann::json j;
  j["out"] = out;
  j["backend"] = r.backend;
  j["ranks"] = r.ranks;
  j["host"] = r.host.hostname;
  j["wall_s"] = r.wall_s;
  j["compute_points"] = r.compute.size();
  j["comm_points"] = r.comm.size();
  nlohmann::json g = nlohmann::json::object();
  for (const auto& [m, f] : r.gemm)
    g[std::string(enum_to_string(m))] = {{"gflops", f.flop_per_us * 1e-3}, {"call_us", f.call_us}, {"rms_rel_error", f.fit.rms_rel_error}};
  j["gemm"] = g;
  j["kernels"] = {{"latency_us", r.stream.latency_us}, {"gbps", r.stream.gbps()}, {"rms_rel_error", r.stream.fit.rms_rel_error}};
  if (r.have_comm_fit)
    j["comm"] = {{"launch_us", r.comm_fit.launch_us}, {"step_us", r.comm_fit.step_us}, {"gbps", r.comm_fit.gbps()},
                 {"reduce_gbps", r.comm_fit.reduce_gbps()},
                 {"rms_rel_error", r.comm_fit.fit.rms_rel_error}};
  return j;
}

}  // namespace

int run_calibrate(int argc, char** argv) {
  const int lsize = calib::launcher_size();
  const bool under_launcher = lsize > 0;
  const bool quiet = calib::launcher_rank() > 0;
  Args a;
  calib::CalibrateOptions opts;
  std::string out;
  int64_t ranks = 0;
  std::vector<int64_t> worlds;  // per scenario
  std::string in_situ_only;     // this job is an earlier launch of the in-situ executions
  double earlier_s = 0;         // what the earlier launches took (s)
  double in_sample_bound_pct = calib::kInSampleBoundPct;  // warn beyond it (in_sample.hpp)
  try {
    a = parse(argc, argv, 1, kOptions);
    if (a.flag("--help")) {
      if (!quiet)
        std::printf("usage: paralab calibrate --backend cpu|cuda --out FILE [SCENARIO ...] [options]\n"
                    "  Measures this machine with the executor's code (GEMMs, kernels, collectives; every rank at once),\n"
                    "  fits the simulator's parameters and writes a topology with [[calibration.*]] points.\n%s",
                    options_help(kOptions).c_str());
      return 0;
    }
    opts.backend = a.value("--backend").value_or("cpu");
    if (opts.backend != "cpu" && opts.backend != "cuda") throw UsageError("--backend must be cpu or cuda, got '" + opts.backend + "'");
    out = a.value("--out").value_or("");
    if (out.empty()) throw UsageError("--out FILE is required (where the calibrated topology goes)");
    check_writable("--out", out);
    for (const auto& p : a.positional) opts.scenarios.push_back(p);
    if (auto s = a.value("--scenario")) {
      std::stringstream ss(*s);
      std::string item;
      while (std::getline(ss, item, ','))
        if (!item.empty()) opts.scenarios.push_back(item);
    }
    opts.sets = a.sets;
    if (auto r = a.value("--reps")) opts.reps = static_cast<int>(parse_count("--reps", *r, 1, 1000));
    if (auto b = a.value("--base-topology")) opts.base_topology = resolve_topology(*b, ".", SourceLoc{}, "--base-topology");
    opts.quick = a.flag("--quick");
    opts.sweep = !a.flag("--no-sweep");
    opts.comm = !a.flag("--no-comm");
    opts.in_situ = !a.flag("--no-in-situ");
    opts.in_situ_launches = calib::InSituPlan::kDefaultLaunches;
    if (auto l = a.value("--in-situ-launches")) opts.in_situ_launches = static_cast<int>(parse_count("--in-situ-launches", *l, 1, 20));
    if (auto b = a.value("--in-sample-bound")) in_sample_bound_pct = parse_number("--in-sample-bound", *b, 0, 100);
    if (auto d = a.value("--in-situ-only")) in_situ_only = *d;
    if (auto d = a.value("--in-situ-from")) opts.in_situ_from = *d;
    if (auto e = a.value("--earlier-s")) {
      char* end = nullptr;
      earlier_s = std::strtod(e->c_str(), &end);
      if (end == e->c_str() || *end != '\0' || !(earlier_s >= 0 && earlier_s < 1e7))
        throw UsageError("--earlier-s needs seconds >= 0, got '" + *e + "'");
    }
    // Input errors before any rank starts: every scenario must load.
    for (const auto& f : opts.scenarios) {
      const Scenario s = load_scenario(f, opts.sets);
      ranks = std::max<int64_t>(ranks, s.world_size());
      worlds.push_back(s.world_size());
    }
    if (auto r = a.value("--ranks")) ranks = parse_count("--ranks", *r, 1, 1024);
    else if (opts.scenarios.empty()) ranks = 2;  // scenarios: as many ranks busy as their run has
#if !defined(PARALAB_EXEC_MPI)
    if (ranks > 1) {
      if (!quiet) std::fprintf(stderr, "paralab calibrate: this build has no MPI: measuring with one rank\n");
      ranks = 1;
    }
#endif
  } catch (const UsageError& e) {
    if (!quiet) std::fprintf(stderr, "paralab calibrate: %s\nusage: paralab calibrate --backend cpu|cuda --out FILE [SCENARIO ...]\n", e.what());
    return 2;
  } catch (const ConfigError& e) {
    if (!quiet) std::fprintf(stderr, "paralab calibrate: error: %s\n", e.what());
    return 2;
  }

  // Not launched by mpirun: this process starts the launches and draws their progress. The
  // in-situ executions spread over several launches of the job (analysis/in_situ_run.hpp): the
  // earlier ones first, each leaving its traces for the measuring job, which comes last.
  const bool parent = !under_launcher && in_situ_only.empty();
  const bool spread = parent && opts.in_situ && opts.in_situ_launches > 1 && opts.in_situ_from.empty() &&
                      std::any_of(worlds.begin(), worlds.end(), [&](int64_t w) { return calib::executes_in_situ(w, ranks); });
  // Nothing spread and not one of the launches of a spread job (a job someone else launched
  // included): this job is the only launch.
  if (!spread && in_situ_only.empty() && opts.in_situ_from.empty()) opts.in_situ_launches = 1;
  const bool forward = a.flag("--progress-lines");  // a parent (validate) draws the bar
  calib::ProgressBar bar("calibrate");
  auto show = [&](double f, const std::string& what) {
    if (forward && parent) {
      std::fprintf(stderr, "%s\n", calib::progress_line(f, what).c_str());
      std::fflush(stderr);
    } else {
      bar.update(f, what);
    }
  };
  // The bar's share of the earlier launches (the measuring job's sweep takes most of the time).
  const double pre = spread ? 0.06 * (opts.in_situ_launches - 1) : 0.0;
  std::optional<calib::TempDir> traces;
  std::vector<std::string> extra_args;  // for the measuring job
  if (parent && (ranks > 1 || spread)) {
    calib::Launcher l;
    try {
      l = calib::make_launcher(static_cast<int>(ranks));
      if (spread) traces.emplace("paralab-in-situ");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "paralab calibrate: error: %s\n", e.what());
      return 1;
    }
    // One job of `ranks` ranks (one rank: a plain child process), its progress drawn in [lo, hi].
    auto launch = [&](const std::string& job, const std::vector<std::string>& more, double lo, double hi, bool keep_stdout) {
      std::vector<std::string> cmd = l.prefix;
      cmd.push_back(calib::self_executable().string());
      for (int i = 0; i < argc; ++i) cmd.push_back(argv[i]);
      cmd.insert(cmd.end(), more.begin(), more.end());
      if (!forward) cmd.push_back("--progress-lines");
      const calib::ProcessResult r = calib::run_process(cmd, l.env, [&](const std::string& line) {
        double f = 0;
        std::string what;
        if (calib::parse_progress_line(line, f, what)) return show(lo + (hi - lo) * f, what);
        if (bar.active()) std::fprintf(stderr, "\r\033[K");
        std::fprintf(stderr, "%s\n", line.c_str());
      });
      if (keep_stdout) std::fwrite(r.out.data(), 1, r.out.size(), stdout);
      if (r.exit_code != 0) {
        bar.done();
        std::fprintf(stderr, "paralab calibrate: %s (%s ...) failed with exit code %d\n", job.c_str(), l.description.c_str(),
                     r.exit_code);
      }
      return r.exit_code;
    };
    const int earlier = spread ? opts.in_situ_launches - 1 : 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < earlier; ++k) {
      char name[32];
      std::snprintf(name, sizeof name, "launch-%02d", k + 1);  // name order is launch order (up to 20)
      const std::string dir = (traces->path() / name).string();
      const double lo = pre * k / earlier, hi = pre * (k + 1) / earlier;
      const std::string job = "in-situ launch " + std::to_string(k + 1) + " of " + std::to_string(opts.in_situ_launches);
      if (launch(job, {"--in-situ-only", dir}, lo, hi, false) != 0) return 1;
    }
    earlier_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (spread) extra_args = {"--in-situ-from", traces->path().string(), "--earlier-s", std::to_string(earlier_s)};
    if (ranks > 1) {
      const int code = launch("the measuring job", extra_args, pre, 1.0, true);
      bar.done();
      return code == 0 ? 0 : 1;
    }
    opts.in_situ_from = traces->path();  // one rank: the measuring job is this process
  }

  std::unique_ptr<exec::Transport> world;
  try {
#if defined(PARALAB_EXEC_MPI)
    if (under_launcher)
      world = exec::make_mpi_transport(&argc, &argv, exec::CoreTurnsMode::from_environment(), exec::DoorbellMode::from_environment());
#endif
    if (!world) world = exec::make_self_transport();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paralab calibrate: error: %s\n", e.what());
    return 1;
  }
  const int rank = world->rank();
  if (rank == 0) {
    if (forward && !parent)  // a rank of a job this command's parent started: progress as lines
      opts.progress = [](double f, const std::string& what) {
        std::fprintf(stderr, "%s\n", calib::progress_line(f, what).c_str());
        std::fflush(stderr);
      };
    else
      opts.progress = [&](double f, const std::string& what) { show(pre + (1.0 - pre) * f, what); };
  }
  calib::CalibrationResult res;
  try {
    if (!in_situ_only.empty()) {  // an earlier launch: its traces are its output
      (void)calib::run_in_situ_launch(*world, opts, in_situ_only);
      bar.done();
      world->finalize();
      return 0;
    }
    res = calib::run_calibration(*world, opts);
  } catch (const std::exception& e) {
    bar.done();
    const auto* xe = dynamic_cast<const exec::ExecError*>(&e);
    std::fprintf(stderr, "paralab calibrate: rank %d: error: %s\n", rank, xe ? xe->cause().c_str() : e.what());
    std::fflush(stderr);
    world->abort(1);
    return 1;
  }
  bar.done();
  res.wall_s += earlier_s;
  int64_t status = 0;
  if (rank == 0) {
    try {
      write_file_atomic(out, calib::topology_toml(res));
      (void)load_topology(out);  // the simulator must accept it as it is
      // Each scenario executed in situ, simulated on the file, against those executions: a
      // calibration at odds with itself is said now (validate makes its own again).
      std::vector<std::string> warnings;
      for (const auto& f : opts.scenarios)
        if (const std::optional<calib::InSample> fit = calib::in_sample(f, opts.sets, out))
          if (std::string w = calib::in_sample_warning(*fit, in_sample_bound_pct); !w.empty())
            warnings.push_back(fit->executions.scenario + ": " + w);
      if (a.flag("--json")) {
        nlohmann::json j = summary_json(res, out);
        j["warnings"] = warnings;
        std::printf("%s\n", j.dump(2).c_str());
      } else {
        print_summary(res, out);
      }
      for (const std::string& w : warnings) std::fprintf(stderr, "paralab calibrate: %s\n", w.c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "paralab calibrate: error: %s\n", e.what());
      status = 1;
    }
    std::fflush(stdout);
  }
  world->all_reduce(&status, 1, ReduceOp::max);
  world->finalize();
  return static_cast<int>(status);
}

}  // namespace paralab::cli
