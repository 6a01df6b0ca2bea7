// paralab — per-rank mode's speed (results: bench/results/per_rank.md):
//   1. GPT-3 175B on 1,024 A100s with every rank distinct (variation.gpu_speed_cv = 0.05): one
//      sample's simulation (no per-op record, as --samples runs it), CPU seconds of one thread;
//      goal < 5 s;
//   2. 100 such samples on every core (wall seconds; goal < 5 minutes on 2 cores);
//   1 and 2 exact (one class per distinct rank) and with simulation.pace_tensor_groups (each
//   tensor-parallel group at its slowest member's speed: 1/8 of the ranks), side by side; the
//   exact samples only with --exact-samples (they take about 15 minutes on 2 cores);
//   3. Llama 3 405B on 16,384 H100s with one straggler (rank 0 at 1.3x): a full simulate() with
//      per-op record and finalize, CPU seconds and the process's peak RSS; goal < 30 s, 8 GiB.
//
//   paralab_per_rank_bench [--samples N] [--skip-samples] [--exact-samples]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/bench_clock.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/step_ir.hpp"
#include "sim/samples.hpp"
#include "sim/simulate.hpp"

using namespace paralab;

int main(int argc, char** argv) {
  int64_t samples = 100;
  bool skip_samples = false, exact_samples = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--samples") && i + 1 < argc) samples = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--skip-samples")) skip_samples = true;
    else if (!std::strcmp(argv[i], "--exact-samples")) exact_samples = true;
  }
  const std::string dir = std::string(PARALAB_SOURCE_DIR) + "/bench/sim/speed/";
  std::printf("| case | GPUs | simulated ranks | step (sim.) | cpu s | wall s | peak RSS GiB |\n|---|---|---|---|---|---|---|\n");
  for (const bool pace : {false, true}) {
    const Scenario s = load_scenario(dir + "gpt3-175b-1024.toml",
                                     {"variation.gpu_speed_cv=0.05", std::string("simulation.pace_tensor_groups=") + (pace ? "true" : "false")});
    const char* mode = pace ? "paced TP groups" : "exact";
    const StepIR ir = build_step_ir(s);
    sim::SimulateOptions o;
    o.record_ops = false;
    const double c0 = bench::cpu_s(), w0 = bench::wall_s();
    const sim::Simulation r = sim::simulate(ir, o);
    std::printf("| gpt3-175b-1024, gpu_speed_cv 0.05, one sample, %s | %lld | %lld | %.3f s | %.2f | %.2f | %.2f |\n", mode,
                (long long)ir.layout.world(), (long long)r.simulated_ranks, r.end_us * 1e-6, bench::cpu_s() - c0,
                bench::wall_s() - w0, bench::peak_rss_gib());
    std::fflush(stdout);
    if (!skip_samples && (pace || exact_samples)) {
      const double c1 = bench::cpu_s(), w1 = bench::wall_s();
      const sim::Distribution d = sim::simulate_samples(ir, samples, 0);
      std::printf("| gpt3-175b-1024, %lld samples on every core, %s (p50 %.3f s, p99 %.3f s) | %lld | %lld | %.3f s (mean) | %.1f | %.1f | %.2f |\n",
                  (long long)samples, mode, d.p50_s, d.p99_s, (long long)ir.layout.world(),
                  (long long)d.runs.front().simulated_ranks, d.mean_s, bench::cpu_s() - c1, bench::wall_s() - w1,
                  bench::peak_rss_gib());
      std::fflush(stdout);
    }
  }
  {
    Scenario s = load_scenario(dir + "llama3-405b-16k.toml");
    Straggler st;
    st.rank = 0;
    st.slowdown = 1.3;
    s.variation.stragglers.push_back(st);
    const double c0 = bench::cpu_s(), w0 = bench::wall_s();
    const StepIR ir = build_step_ir(s);
    const sim::Simulation r = sim::simulate(ir);
    std::printf("| llama3-405b-16k, one 1.3x straggler (IR + simulate + finalize) | %lld | %lld | %.3f s | %.2f | %.2f | %.2f |\n",
                (long long)ir.layout.world(), (long long)r.simulated_ranks, r.result.step_time_s, bench::cpu_s() - c0,
                bench::wall_s() - w0, bench::peak_rss_gib());
  }
  return 0;
}
