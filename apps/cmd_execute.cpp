// paralab execute — run a scenario's training step for real: one process per modeled device
// (`mpirun -np N paralab execute SCENARIO --backend cpu`), each running its rank's StepGraph on
// the backend, with measured per-op timings and memory gathered to rank 0 and written in the
// simulator's formats (--json summary, --trace Chrome trace with the same op ids).
//
// Failure handling (docs/executor.md): input errors are found before MPI starts and reported
// once; a world size that does not match the layout is reported by every rank; any failure
// during the run is printed with its rank and cause and ends every rank (MPI_Abort); outputs
// are written by rank 0 only after every rank succeeded (and --verify passed).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "apps/cli.hpp"
#include "apps/commands.hpp"
#include "exec/error.hpp"
#include "exec/execute.hpp"
#include "ir/enum_names.hpp"
#include "ir/scenario_loader.hpp"
#include "results/result_io.hpp"
#if defined(PARALAB_EXEC_MPI)
#include "exec/mpi/mpi_transport.hpp"
#endif
#include "exec/cuda_plugin.hpp"

namespace paralab::cli {

namespace {

const std::vector<OptionSpec> kOptions = {
    {"--backend", true, "cpu | cuda (default cpu)"},
    {"--trace", true, "write a Chrome/Perfetto trace of the measured step to FILE"},
    {"--verify", false, "check collectives, sampled ops against references, state and deadlock freedom"},
    {"--watchdog", true, "seconds an op may wait for a dependency or a peer before the run fails (default 60)"},
    {"--steps", true, "optimizer steps to run after the warm-up; the last one is measured (default 1)"},
    {"--measure", true, "run steps after the warm-up until S seconds have passed (at least one, at most --steps)"},
    {"--trace-steps", true, "also write a trace of every step after the warm-up, to PREFIX-0.json ... PREFIX-<steps-1>.json"},
    {"--warmup", true, "first run warm-up steps for S seconds (at least one step; default 0: none)"},
    {"--slow-rank", true, "with --slowdown: the rank R whose compute ops run F times (0 .. ranks-1)"},
    {"--slowdown", true, "F in [1, 100]: rank R's compute ops run floor(F) times, a fraction F-floor(F) of them once more; results unchanged"},
    {"--gpus", true, "cuda backend without mpirun: one process drives N GPUs of this node (a thread per device)"},
    {"--help", false, "this help"},
};

// The launcher's rank of this process before MPI starts (Open MPI, PMI, PMIx), or -1.
int launcher_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return -1;
}
int launcher_size() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return std::getenv("PMIX_RANK") ? 2 : 0;  // PMIx without a size variable: treat as a launch
}

// PARALAB_EXEC_FAULT="rank=1,action=kill|throw|hang|drop,op=<id>|<kind>[,step=S]" (tests only).
exec::FaultInjection parse_fault(const char* spec) {
  exec::FaultInjection f;
  if (!spec || !*spec) return f;
  std::string s = spec;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = s.find(',', pos);
    const std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? s.size() + 1 : comma + 1;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) throw UsageError("PARALAB_EXEC_FAULT: '" + item + "' is not key=value");
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    if (k == "rank") f.rank = std::stoll(v);
    else if (k == "step") f.step = std::stoll(v);
    else if (k == "action") {
      using A = exec::FaultInjection::Action;
      f.action = v == "kill" ? A::kill : v == "throw" ? A::throw_error : v == "hang" ? A::hang : v == "drop" ? A::drop : A::none;
      if (f.action == A::none) throw UsageError("PARALAB_EXEC_FAULT: action must be kill, throw, hang or drop");
    } else if (k == "op") {
      if (!v.empty() && std::isdigit(static_cast<unsigned char>(v[0]))) f.op = static_cast<OpId>(std::stoul(v));
      else if (auto kind = op_kind_from_string(v)) f.kind = *kind;
      else throw UsageError("PARALAB_EXEC_FAULT: op must be an op id or kind, got '" + v + "'");
    } else {
      throw UsageError("PARALAB_EXEC_FAULT: unknown key '" + k + "'");
    }
  }
  if (f.rank < 0 || (!f.op && !f.kind)) throw UsageError("PARALAB_EXEC_FAULT needs rank= and op=");
  return f;
}

double parse_positive(const std::string& opt, const std::string& v) {
  const std::optional<double> x = to_number(v);
  if (!x) throw UsageError(opt + " needs a number, got '" + v + "'");
  if (!(*x > 0)) throw UsageError(opt + " must be > 0, got '" + v + "'");
  return *x;
}

// --slow-rank R --slowdown F (exec/slowdown.hpp): both or neither; R a rank of the layout.
void parse_slowdown(const Args& a, int64_t world, exec::ExecuteOptions& opts) {
  const auto r = a.value("--slow-rank"), f = a.value("--slowdown");
  if (!r && !f) return;
  if (!r) throw UsageError("--slowdown needs --slow-rank R, the rank to slow");
  if (!f) throw UsageError("--slow-rank needs --slowdown F, how much slower (F >= 1)");
  const std::optional<double> rank = to_number(*r);
  if (!rank || *rank != std::floor(*rank) || *rank < 0 || *rank >= static_cast<double>(world))
    throw UsageError("--slow-rank must be a rank of the layout, 0 .. " + std::to_string(world - 1) + ", got '" + *r + "'");
  opts.slow_rank = static_cast<int64_t>(*rank);
  opts.slowdown = parse_number("--slowdown", *f, 1, exec::kMaxSlowdown);
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

void print_table(const exec::ExecuteOutcome& out, const StepIR& ir) {
  const StepResult& r = out.result;
  const Scenario& s = ir.scenario;
  const auto& p = s.parallel;
  const size_t steps = out.step_times_s.size();
  std::printf("executed   %s on %lld ranks (backend %s, topology %s), %zu step%s (%lld warm-up), measured the last\n",
              s.name.c_str(), (long long)r.world_size, r.backend.c_str(), r.topology.c_str(), steps, steps > 1 ? "s" : "",
              (long long)out.warmup_steps);
  if (out.core_turns > 0)
    std::printf("core turns %d: the ranks of a host took turns on its cores, first come first served, %s (docs/executor.md)\n",
                out.core_turns, out.core_turns_batch ? "under SCHED_BATCH" : "SCHED_BATCH refused");
  if (out.doorbells)
    std::printf("doorbells  a rank entering a call woke its host peers' sleeping pollers (docs/executor.md)\n");
  if (steps > 1) {
    std::printf("steps      ");
    for (size_t i = 0; i < steps; ++i) {
      if (i == 8 && steps > 10) {  // first and last few: warm-up and steady state
        std::printf("... ");
        i = steps - 2;
      }
      std::printf("%.4g%s", out.step_times_s[i], i + 1 < steps ? " " : " s\n");
    }
  }
  std::printf("layout     TP%lld PP%lld CP%lld DP%lld (%s, ZeRO-%lld%s), %lld micro-batches of %lld x %lld tokens, %s\n",
              (long long)p.tensor, (long long)p.pipeline, (long long)p.context, (long long)p.data,
              std::string(to_string(p.schedule)).c_str(), (long long)p.zero_stage, p.sequence_parallel ? ", SP" : "",
              (long long)s.num_microbatches(), (long long)s.training.micro_batch_size, (long long)s.model.seq_length,
              std::string(to_string(s.training.precision)).c_str());
  std::printf("step time  %.3f s   %.0f tokens/s   %.4f model TFLOP/s per rank   MFU %.1f%%   loss %.4f\n", r.step_time_s,
              r.tokens_per_s, r.model_tflops_per_gpu, 100 * r.mfu, out.loss);
  const auto& b = r.breakdown;
  std::printf("breakdown  compute %.3f s, exposed comm", b.compute_s);
  for (int c = 0; c < kCommClasses; ++c)
    if (b.exposed_comm_s[static_cast<size_t>(c)] > 0)
      std::printf(" %s %.3f s", std::string(to_string(static_cast<CommClass>(c))).c_str(), b.exposed_comm_s[static_cast<size_t>(c)]);
  std::printf(", bubble %.3f s (%.1f%%), host %.3f s\n", b.bubble_s, 100 * r.bubble_fraction, b.host_s);
  std::printf("memory     %5s %5s %10s %10s %10s %10s\n", "rank", "stage", "peak GiB", "resident", "transient", "RSS GiB");
  for (const auto& rr : out.ranks)
    std::printf("           %5lld %5lld %10.4f %10.4f %10.4f %10.4f\n", (long long)rr.rank, (long long)rr.stage,
                rr.memory.peak_total() / kGiB, rr.memory.resident_total() / kGiB, rr.memory.peak_transient / kGiB,
                rr.rss_peak_bytes / kGiB);
  for (const auto& rr : out.ranks) {  // device backends: the allocator's view beside the IR's accounting
    if (rr.device.empty()) continue;
    auto get = [&](const char* k) { auto it = rr.device.find(k); return it == rr.device.end() ? 0.0 : it->second; };
    std::printf("device     rank %lld on GPU %d: pool high-water %.2f GiB used / %.2f GiB reserved, %.2f GiB in use after "
                "the step (IR peak %.2f GiB)\n",
                (long long)rr.rank, (int)get("device"), get("pool_used_high_gib"), get("pool_reserved_high_gib"),
                get("device_used_after_step_gib"), get("planned_peak_gib"));
  }
  if (out.slow_rank >= 0)
    for (const auto& rr : out.ranks)
      if (rr.rank == out.slow_rank)
        std::printf("slowdown   rank %lld's compute ops ran %.3g times on average (%lld extra runs in the measured step)\n",
                    (long long)rr.rank, out.slowdown, (long long)rr.extra_runs);
  std::printf("ops        %lld executed, wall %.2f s\n", (long long)r.events, r.wall_s);
}

// precision = fp8 where linear GEMMs ran in bf16 instead (exec/cuda/ops_gemm.cpp): the measured
// step is then not an FP8 step, and nobody should read it as one. On stderr, so --json stays JSON.
void warn_fp8_fallbacks(const exec::ExecuteOutcome& out) {
  for (const auto& rr : out.ranks) {
    auto get = [&](const char* k) { auto it = rr.device.find(k); return it == rr.device.end() ? 0.0 : it->second; };
    if (get("fp8_fallback_gemms") <= 0) continue;
    std::fprintf(stderr,
                 "warning: rank %lld: %.0f FP8 GEMM calls ran in bf16 (shapes cuBLASLt refused at the call: %.0f, "
                 "without an FP8 algorithm: %.0f; others not multiples of 16); see docs/cuda_backend.md, \"FP8\"\n",
                 (long long)rr.rank, get("fp8_fallback_gemms"), get("fp8_shapes_refused_at_call"),
                 get("fp8_shapes_without_algorithm"));
  }
}

void print_verify(const exec::ExecuteOutcome& out, std::FILE* to) {
  const exec::VerifyReport& v = out.verify;
  std::fprintf(to, "verify     %s: %lld checks, %lld failed\n", out.verify_failed ? "FAILED" : "passed",
               (long long)v.total(), (long long)v.failed());
  for (const auto& [name, c] : v.categories)
    std::fprintf(to, "           %-24s %6lld / %-6lld max error %.3g\n", name.c_str(), (long long)c.passed,
                 (long long)c.total, c.max_error);
  for (const auto& f : v.failures) std::fprintf(to, "  failure: %s\n", f.c_str());
}

}  // namespace

int run_execute(int argc, char** argv) {
  const int lrank = launcher_rank();
  const bool quiet = lrank > 0;  // input errors: reported once, by rank 0
  Args a;
  Scenario s;
  std::optional<StepIR> ir;
  exec::ExecuteOptions opts;
  [[maybe_unused]] int gpus = 0;  // --gpus N: N ranks as threads of this process (cuda backend)
  try {
    a = parse(argc, argv, 1, kOptions);
    if (a.flag("--help")) {
      if (!quiet)
        std::printf("usage: mpirun -np N paralab execute SCENARIO [options]   (without mpirun: one rank)\n%s",
                    options_help(kOptions).c_str());
      return 0;
    }
    opts.backend = a.value("--backend").value_or("cpu");
    if (opts.backend != "cpu" && opts.backend != "cuda")
      throw UsageError("--backend must be cpu or cuda, got '" + opts.backend + "'");
    opts.verify = a.flag("--verify");
    if (auto w = a.value("--watchdog")) opts.watchdog_s = parse_positive("--watchdog", *w);
    if (auto st = a.value("--steps")) {
      const double n = parse_positive("--steps", *st);
      if (n != std::floor(n)) throw UsageError("--steps needs a whole number, got '" + *st + "'");
      opts.steps = static_cast<int64_t>(n);
    }
    if (auto m = a.value("--measure")) {
      opts.measure_s = parse_number("--measure", *m, 0, 3600);
      if (!a.value("--steps")) throw UsageError("--measure needs --steps N, the most steps it may run");
    }
    opts.keep_steps = a.value("--trace-steps").has_value();
    if (opts.keep_steps && a.value("--trace-steps")->empty()) throw UsageError("--trace-steps needs a file name prefix");
    check_outputs(a, {"--trace"});
    if (opts.keep_steps) check_writable("--trace-steps", *a.value("--trace-steps"), /*prefix=*/true);
    if (auto w = a.value("--warmup")) opts.warmup_s = parse_number("--warmup", *w, 0, 3600);
    if (auto g = a.value("--gpus")) {
      const double n = parse_positive("--gpus", *g);
      if (n != std::floor(n)) throw UsageError("--gpus needs a whole number, got '" + *g + "'");
      if (opts.backend != "cuda") throw UsageError("--gpus needs --backend cuda (one process, a thread per GPU)");
      if (launcher_size() > 0) throw UsageError("--gpus is for runs without mpirun; under mpirun each process drives one GPU");
      gpus = static_cast<int>(n);
    }
    opts.fault = parse_fault(std::getenv("PARALAB_EXEC_FAULT"));
    s = load_scenario(a.require_positional(0, "SCENARIO"), a.sets);
    ir.emplace(build_step_ir(s));
    parse_slowdown(a, ir->layout.world(), opts);
  } catch (const UsageError& e) {
    if (!quiet) std::fprintf(stderr, "paralab execute: %s\nusage: paralab execute SCENARIO --backend cpu|cuda [options]\n", e.what());
    return 2;
  } catch (const ConfigError& e) {
    if (!quiet) std::fprintf(stderr, "paralab execute: error: %s\n", e.what());
    return 2;
  }

  // One rank's run on its world (a process under MPI, alone, or a thread with --gpus).
  auto run_rank = [&](exec::Transport& world_ref) -> int {
    exec::Transport* world = &world_ref;
    const int rank = world->rank();
    const int64_t need = ir->layout.world();
    if (world->size() != need) {
      const auto& p = s.parallel;
      std::fprintf(stderr,
                   "paralab execute: rank %d: error: scenario '%s' needs %lld ranks (tensor %lld x pipeline %lld x context "
                   "%lld x data %lld) but %d %s launched; run `mpirun -np %lld paralab execute %s ...`\n",
                   rank, s.name.c_str(), (long long)need, (long long)p.tensor, (long long)p.pipeline, (long long)p.context,
                   (long long)p.data, world->size(), world->size() == 1 ? "was" : "were", (long long)need, s.file.string().c_str());
      world->finalize();
      return 2;
    }

    exec::ExecuteOutcome out;
    try {
      out = exec::execute(*ir, *world, opts);
    } catch (const std::exception& e) {
      const auto* xe = dynamic_cast<const exec::ExecError*>(&e);
      std::fprintf(stderr, "paralab execute: rank %lld: error: %s\n", xe ? (long long)xe->rank() : (long long)rank,
                   xe ? xe->cause().c_str() : e.what());
      std::fflush(stderr);
      world->abort(1);  // every other rank ends now (MPI_Abort); one rank: nobody else to stop
      return 1;
    }

    // Rank 0 writes the outputs, only now that every rank succeeded; all ranks learn the verdict.
    int64_t status = 0;
    if (out.root) {
      try {
        if (out.verified) print_verify(out, out.verify_failed ? stderr : (a.flag("--json") ? stderr : stdout));
        warn_fp8_fallbacks(out);
        if (out.verify_failed) {
          std::fprintf(stderr, "paralab execute: verification failed; no results written\n");
          status = 1;
        } else {
          if (auto path = a.value("--trace")) write_file_atomic(*path, trace_json(out.result, *ir));
          if (auto prefix = a.value("--trace-steps"))
            for (size_t k = 0; k < out.steps.size(); ++k)
              write_file_atomic(*prefix + "-" + std::to_string(k) + ".json", trace_json(out.steps[k], *ir));
          if (a.flag("--json")) std::printf("%s\n", exec::outcome_json(out).dump(2).c_str());
          else print_table(out, *ir);
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "paralab execute: rank 0: error: %s\n", e.what());
        status = 1;
      }
      std::fflush(stdout);
    }
    if (out.verify_failed) status = 1;
    try {
      world->all_reduce(&status, 1, ReduceOp::max);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "paralab execute: rank %d: error: %s\n", rank, e.what());
      world->abort(1);
      return 1;
    }
    world->finalize();
    return static_cast<int>(status);
  };

  if (gpus > 0) {
    try {
      return exec::cuda_plugin().run_rank_threads(gpus, run_rank);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "paralab execute: error: %s\n", e.what());
      return 1;
    }
  }
  // The world: MPI under a launcher, one rank otherwise.
  std::unique_ptr<exec::Transport> world;
  try {
#if defined(PARALAB_EXEC_MPI)
    if (launcher_size() > 0)
      world = exec::make_mpi_transport(&argc, &argv, exec::CoreTurnsMode::from_environment(), exec::DoorbellMode::from_environment());
#else
    if (launcher_size() > 1)
      throw exec::ExecError(lrank, "this paralab was built without MPI (PARALAB_HAVE_MPI off): it runs one rank only");
#endif
    if (!world) world = exec::make_self_transport();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paralab execute: error: %s\n", e.what());
    return 1;
  }
  return run_rank(*world);
}

}  // namespace paralab::cli
