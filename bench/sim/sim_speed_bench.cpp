// paralab — simulator speed: IR generation, network build, event loop and finalize for one
// training step, in CPU seconds of this process (one thread) and wall seconds, with events
// per second and peak memory (results: bench/results/sim_speed.md).
//
//   paralab_sim_speed_bench [SCENARIO.toml ...] [--repeat N]
//
// Without arguments: the two goal scenarios in bench/sim/speed/ (GPT-3 175B on 1,024 A100s,
// goal < 2 s on one core; Llama 3 405B on 16,384 H100s, goal < 30 s and < 8 GiB). CPU time is
// the figure to compare with the goals on a shared machine (wall time includes waiting for a
// core); the minimum over --repeat runs is reported.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_clock.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/step_ir.hpp"
#include "sim/simulate.hpp"

using namespace paralab;

namespace {

using bench::cpu_s;
using bench::peak_rss_gib;
using bench::wall_s;

struct Times {
  double ir_cpu = 1e300, sim_cpu = 1e300, total_cpu = 1e300, total_wall = 1e300;
  double engine_wall = 0, network_wall = 0, finalize_wall = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  int repeat = 1;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = std::max(1, std::atoi(argv[++i]));
    else files.emplace_back(argv[i]);
  }
  if (files.empty()) {
    const std::string dir = std::string(PARALAB_SOURCE_DIR) + "/bench/sim/speed/";
    files = {dir + "gpt3-175b-1024.toml", dir + "llama3-405b-16k.toml"};
  }
  std::printf("| scenario | GPUs | ops | events | step (sim.) | IR cpu s | simulate cpu s | total cpu s | total wall s | "
              "events/s (cpu) | network calls | flows | peak RSS GiB |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string& f : files) {
    const Scenario s = load_scenario(f);
    Times best;
    sim::Simulation last;
    int64_t ops = 0;
    for (int r = 0; r < repeat; ++r) {
      const double c0 = cpu_s(), w0 = wall_s();
      const StepIR ir = build_step_ir(s);
      const double c1 = cpu_s();
      sim::Simulation sim = sim::simulate(ir);
      const double c2 = cpu_s(), w2 = wall_s();
      ops = 0;
      for (const auto& g : ir.stages) ops += static_cast<int64_t>(g.ops.size());
      if (c2 - c0 < best.total_cpu) {
        best = {c1 - c0, c2 - c1, c2 - c0, w2 - w0, sim.engine_s, sim.network_build_s, sim.finalize_s};
        last = std::move(sim);
      }
    }
    const StepResult& res = last.result;
    std::printf("| %s | %lld | %lld | %lld | %.3f s | %.3f | %.3f | %.3f | %.3f | %.3g | %llu | %llu | %.2f |\n",
                s.name.c_str(), (long long)res.world_size, (long long)ops, (long long)res.events, res.step_time_s,
                best.ir_cpu, best.sim_cpu, best.total_cpu, best.total_wall,
                static_cast<double>(res.events) / best.sim_cpu, (unsigned long long)last.network.calls,
                (unsigned long long)last.network.flows, peak_rss_gib());
    std::fprintf(stderr, "%s: engine %.3f s, network build %.3f s, finalize %.3f s (wall, best run)\n", s.name.c_str(),
                 best.engine_wall, best.network_wall, best.finalize_wall);
    std::fflush(stdout);
  }
  return 0;
}
