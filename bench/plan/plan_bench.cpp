// paralab — planner speed and credibility (results: bench/results/plan_speed.md).
//
//   paralab_plan_bench [SCENARIO.toml] [--threads N] [--baseline t,p,d] [--exact] [--no-prune]
//
// Default: bench/plan/gpt3-175b-1024.toml (GPT-3 175B on 1,024 A100s, nothing pinned). Prints
// the candidates considered / invalid / pruned / simulated, wall and CPU seconds of the whole
// sweep, the top five layouts, and with --baseline the given layout (TP, PP, DP; micro-batch 1,
// 1F1B, selective recomputation and SP as Megatron ran GPT-3) simulated exactly beside the
// winner, with the planner's explanation.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "bench/bench_clock.hpp"
#include "ir/scenario_loader.hpp"
#include "plan/planner.hpp"

using namespace paralab;

namespace {

using bench::cpu_s;

void print_layout(const char* tag, const PlannedLayout& l) {
  std::printf("%-9s %-48s step %8.3f s  %9.0f tok/s  MFU %5.1f %%  peak %6.1f GiB  bubble %4.1f %%  (%s)\n", tag,
              l.candidate.label().c_str(), l.result.step_time_s, l.result.tokens_per_s, 100 * l.result.mfu,
              l.result.peak_memory_gib, 100 * l.result.bubble_fraction, std::string(to_string(l.fidelity)).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::string file = std::string(PARALAB_SOURCE_DIR) + "/bench/plan/gpt3-175b-1024.toml";
  PlanOptions o;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) o.threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--exact")) o.exact = true;
    else if (!std::strcmp(argv[i], "--no-prune")) o.prune = false;
    else if (!std::strcmp(argv[i], "--baseline") && i + 1 < argc) {
      Candidate b;
      if (std::sscanf(argv[++i], "%lld,%lld,%lld", reinterpret_cast<long long*>(&b.tensor),
                      reinterpret_cast<long long*>(&b.pipeline), reinterpret_cast<long long*>(&b.data)) != 3) {
        std::fprintf(stderr, "--baseline wants TP,PP,DP\n");
        return 2;
      }
      b.recompute = Recompute::selective;
      b.sequence_parallel = b.tensor > 1;
      o.baseline = b;
    } else file = argv[i];
  }
  const Scenario base = load_scenario(file, {}, /*check_layout=*/false);
  const auto w0 = std::chrono::steady_clock::now();
  const double c0 = cpu_s();
  const PlanResult r = plan(base, o);
  const double cpu = cpu_s() - c0;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();

  std::printf("scenario     %s\n", file.c_str());
  std::printf("threads      %d (hardware: %u)\n", o.threads, std::thread::hardware_concurrency());
  std::printf("candidates   %lld considered, %lld invalid, %lld over memory (estimate), %lld dominated, %lld ruled out "
              "by the lower bound, %lld simulated (%lld did not fit)\n",
              (long long)r.considered, (long long)r.invalid, (long long)r.pruned_memory, (long long)r.pruned_dominated,
              (long long)r.pruned_bound, (long long)r.simulated, (long long)r.simulated_not_fitting);
  std::printf("time         %.1f s wall, %.1f s CPU (all threads)\n", wall, cpu);
  for (size_t i = 0; i < r.layouts.size() && i < 5; ++i) print_layout(i == 0 ? "winner" : "", r.layouts[i]);
  if (r.baseline) {
    print_layout("baseline", *r.baseline);
    if (!r.layouts.empty()) {
      std::printf("winner / baseline tokens/s: %.3f\n", r.layouts[0].result.tokens_per_s / r.baseline->result.tokens_per_s);
      for (const std::string& line : explain(r.layouts[0], *r.baseline)) std::printf("  %s\n", line.c_str());
    }
  }
  return 0;
}
