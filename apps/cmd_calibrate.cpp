// paralab calibrate — measure this machine with the executor's own code paths, fit the hardware
// and the corrections, write a calibrated topology (docs/calibration.md).
//
//   paralab calibrate --backend cpu --out my-host.toml [SCENARIO ...]
//   paralab calibrate --upgrade OLD.toml NEW.toml
//   paralab calibrate --from-step-time RUNS.toml --out FILE   (measured step times, no executor)
//
// Run without mpirun: it starts its own ranks (`mpirun -np N paralab calibrate ...`, the launch
// `paralab validate` uses for `execute`) and draws a progress bar while they measure. Under a
// launcher it is one rank of the job.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/calibration/calibrate.hpp"
#include "analysis/calibration/upgrade.hpp"
#include "analysis/launch.hpp"
#include "apps/calibrate_steps.hpp"
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
    {"--reps", true, "timed passes per replay (default 5)"},
    {"--base-topology", true, "topology whose values the fit replaces (default: the first scenario's, else cpu-host)"},
    {"--quick", false, "a smaller sweep and fewer sizes (tests, a first look)"},
    {"--no-sweep", false, "only the scenarios' own ops (no shape sweep)"},
    {"--no-comm", false, "skip the collective and transfer measurements"},
    {"--no-execute", false, "do not execute the scenarios of the job's size (replay their ops; no corrections)"},
    {"--from-step-time", true, "RUNS.toml: fit corrections to the measured step times of [[run]] entries (docs/calibration.md)"},
    {"--upgrade", false, "OLD.toml NEW.toml: convert a calibration written before schema 2 and exit"},
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
  std::printf("calibrated  %s (%s backend, %d rank%s at once on %s, %d logical CPUs) in %.1f s\n", out.c_str(), r.backend.c_str(),
              r.ranks, r.ranks == 1 ? "" : "s", r.host.hostname.c_str(), r.host.cores, r.wall_s);
  std::printf("measured    %zu compute shapes, %zu communication points, %zu executed scenario%s\n", r.compute.size(), r.comm.size(),
              r.executions.size(), r.executions.size() == 1 ? "" : "s");
  for (const auto& [m, g] : r.gemm)
    std::printf("GEMM %-5s  %.3g GFLOP/s at rate, %.3g us per call (fit rms %.1f%% over %lld shapes)\n",
                std::string(enum_to_string(m)).c_str(), g.flop_per_us * 1e-3, g.call_us, 100 * g.fit.rms_rel_error,
                (long long)g.fit.samples);
  if (r.stream.fit.samples > 0)
    std::printf("kernels     t = %.3g us + bytes / %.3g GB/s (fit rms %.1f%% over %lld shapes); copy %.3g GB/s per rank\n",
                r.stream.latency_us, r.stream.gbps(), 100 * r.stream.fit.rms_rel_error, (long long)r.stream.fit.samples, r.copy_gbps);
  if (r.comm_fit)
    std::printf("comm        L %.3g us + alpha %.3g us per step + bytes / %.3g GB/s + reduced bytes / %.3g GB/s (fit rms %.1f%% "
                "over %lld calls)\n",
                r.comm_fit->launch_us, r.comm_fit->step_us, r.comm_fit->gbps(), r.comm_fit->reduce_gbps(),
                100 * r.comm_fit->fit.rms_rel_error, (long long)r.comm_fit->fit.samples);
  for (const CorrectionRow& c : r.corrections)
    std::printf("correction  %-56s fixed %8.3g us, factor %.3g (%lld samples, MAPE %.1f%%)\n", c.cls.label().c_str(), c.c.fixed_us,
                c.c.factor, (long long)c.samples, c.mape_pct);
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
  if (r.comm_fit)
    j["comm"] = {{"launch_us", r.comm_fit->launch_us}, {"step_us", r.comm_fit->step_us}, {"gbps", r.comm_fit->gbps()},
                 {"reduce_gbps", r.comm_fit->reduce_gbps()}, {"rms_rel_error", r.comm_fit->fit.rms_rel_error}};
  j["corrections"] = nlohmann::json::array();
  for (const CorrectionRow& c : r.corrections)
    j["corrections"].push_back({{"class", c.cls.label()}, {"fixed_us", c.c.fixed_us}, {"factor", c.c.factor},
                                {"samples", c.samples}, {"mape_pct", c.mape_pct}});
  return j;
}

int run_upgrade(const Args& a) {
  if (a.positional.size() != 2) throw UsageError("--upgrade needs OLD.toml NEW.toml");
  const std::filesystem::path old_file = a.positional[0], new_file = a.positional[1];
  check_writable("NEW.toml", new_file);
  const calib::Upgrade u = calib::upgrade_calibration(old_file);
  write_file_atomic(new_file, calib::upgrade_toml(u, old_file));
  (void)load_topology(new_file);  // the simulator must accept it as it is
  if (a.flag("--json")) {
    std::printf("%s\n", nlohmann::json{{"out", new_file.string()}, {"converted", u.converted}, {"dropped", u.dropped}}.dump(2).c_str());
    return 0;
  }
  std::printf("upgraded    %s -> %s (schema %lld)\n", old_file.c_str(), new_file.c_str(), (long long)kCalibrationSchema);
  for (const auto& c : u.converted) std::printf("converted   %s\n", c.c_str());
  for (const auto& d : u.dropped) std::printf("dropped     %s\n", d.c_str());
  return 0;
}

// This command as the parent of its ranks: `mpirun -np N` of itself, its progress drawn here.
int launch_ranks(int argc, char** argv, int64_t ranks, bool forward, calib::ProgressBar& bar) {
  calib::Launcher l;
  try {
    l = calib::make_launcher(static_cast<int>(ranks));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paralab calibrate: error: %s\n", e.what());
    return 1;
  }
  std::vector<std::string> cmd = l.prefix;
  cmd.push_back(calib::self_executable().string());
  for (int i = 0; i < argc; ++i) cmd.push_back(argv[i]);
  if (!forward) cmd.push_back("--progress-lines");
  const calib::ProcessResult r = calib::run_process(cmd, l.env, [&](const std::string& line) {
    double f = 0;
    std::string what;
    if (calib::parse_progress_line(line, f, what)) {
      if (forward) std::fprintf(stderr, "%s\n", calib::progress_line(f, what).c_str());
      else bar.update(f, what);
      return;
    }
    if (bar.active()) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "%s\n", line.c_str());
  });
  std::fwrite(r.out.data(), 1, r.out.size(), stdout);
  bar.done();
  if (r.exit_code != 0)
    std::fprintf(stderr, "paralab calibrate: the job (%s ...) failed with exit code %d\n", l.description.c_str(), r.exit_code);
  return r.exit_code == 0 ? 0 : 1;
}

}  // namespace

int run_calibrate(int argc, char** argv) {
  const bool under_launcher = calib::launcher_size() > 0;
  const bool quiet = calib::launcher_rank() > 0;
  Args a;
  calib::CalibrateOptions opts;
  std::string out;
  int64_t ranks = 0;
  try {
    a = parse(argc, argv, 1, kOptions);
    if (a.flag("--help")) {
      if (!quiet)
        std::printf("usage: paralab calibrate --backend cpu|cuda --out FILE [SCENARIO ...] [options]\n"
                    "       paralab calibrate --upgrade OLD.toml NEW.toml\n"
                    "       paralab calibrate --from-step-time RUNS.toml --out FILE\n"
                    "  Measures this machine with the executor's code (GEMMs, kernels, collectives; every rank at once),\n"
                    "  executes the scenarios of the job's size, fits the hardware and the corrections, and writes a\n"
                    "  topology with its [calibration] (docs/calibration.md).\n%s",
                    options_help(kOptions).c_str());
      return 0;
    }
    if (a.flag("--upgrade")) return run_upgrade(a);
    if (auto f = a.value("--from-step-time")) {
      const std::string o = a.value("--out").value_or("");
      if (o.empty()) throw UsageError("--out FILE is required (where the calibrated topology goes)");
      check_writable("--out", o);
      return run_calibrate_from_step_time(a, *f, o);
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
    opts.execute = !a.flag("--no-execute");
    for (const auto& f : opts.scenarios) ranks = std::max<int64_t>(ranks, load_scenario(f, opts.sets).world_size());
    if (auto r = a.value("--ranks")) ranks = parse_count("--ranks", *r, 1, 1024);
    else if (opts.scenarios.empty()) ranks = 2;
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
  } catch (const std::invalid_argument& e) {  // an upgrade whose calls collide
    std::fprintf(stderr, "paralab calibrate: error: %s\n", e.what());
    return 2;
  } catch (const InputError& e) {
    std::fprintf(stderr, "paralab calibrate: error: %s\n", e.what());
    return 2;
  }

  const bool forward = a.flag("--progress-lines");  // a parent (validate) draws the bar
  calib::ProgressBar bar("calibrate");
  if (!under_launcher && ranks > 1) return launch_ranks(argc, argv, ranks, forward, bar);

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
  if (rank == 0)
    opts.progress = [&](double f, const std::string& what) {
      if (forward) {
        std::fprintf(stderr, "%s\n", calib::progress_line(f, what).c_str());
        std::fflush(stderr);
      } else {
        bar.update(f, what);
      }
    };
  calib::CalibrationResult res;
  try {
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
  int64_t status = 0;
  if (rank == 0) {
    try {
      write_file_atomic(out, calib::calibration_toml(res));
      (void)load_topology(out);  // the simulator must accept it as it is
      if (a.flag("--json")) std::printf("%s\n", summary_json(res, out).dump(2).c_str());
      else print_summary(res, out);
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
