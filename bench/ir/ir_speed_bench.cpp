// paralab — IR generation speed: loading a scenario and generating every rank's StepGraph for
// one optimizer step, in CPU seconds of this (single-threaded) process and peak resident
// memory (results: bench/results/ir_speed.md).
//
//   paralab_ir_speed_bench [SCENARIO.toml] [--repeat N]
//
// Default scenario: GPT-3 175B on 1,024 A100s, TP8 x PP16 x DP8, 1F1B, 128 micro-batches
// (bench/sim/speed/gpt3-175b-1024.toml); goal (issue 2): < 2 s and < 4 GiB on one core.
// Ranks that differ only in their data-parallel (and tensor-parallel) index share their
// stage's graph; the bench asks the IR for every rank's graph to show the API answers for any.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/bench_clock.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/step_ir.hpp"

using namespace paralab;
using bench::cpu_s;
using bench::peak_rss_gib;

int main(int argc, char** argv) {
  std::string file = std::string(PARALAB_SOURCE_DIR) + "/bench/sim/speed/gpt3-175b-1024.toml";
  int repeat = 3;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = std::max(1, std::atoi(argv[++i]));
    else file = argv[i];
  }
  double best_load = 1e300, best_ir = 1e300;
  size_t ops = 0, buffers = 0, stages = 0;
  int64_t world = 0, answered = 0;
  for (int r = 0; r < repeat; ++r) {
    const double t0 = cpu_s();
    const Scenario s = load_scenario(file);
    const double t1 = cpu_s();
    const StepIR ir = build_step_ir(s);
    const double t2 = cpu_s();
    best_load = std::min(best_load, t1 - t0);
    best_ir = std::min(best_ir, t2 - t1);
    ops = buffers = 0;
    for (const StepGraph& g : ir.stages) ops += g.ops.size(), buffers += g.buffers.size();
    stages = ir.stages.size();
    world = ir.layout.world();
    answered = 0;
    for (int64_t rank = 0; rank < world; ++rank) answered += ir.graph_for(rank).ops.empty() ? 0 : 1;
  }
  std::printf("scenario            %s\n", file.c_str());
  std::printf("world               %lld ranks, %zu stage graphs (ranks of a stage share one)\n", (long long)world, stages);
  std::printf("ops / buffers       %zu / %zu\n", ops, buffers);
  std::printf("graph_for(rank)     answered for %lld of %lld ranks\n", (long long)answered, (long long)world);
  std::printf("load cpu s          %.3f (best of %d)\n", best_load, repeat);
  std::printf("IR generation cpu s %.3f (best of %d)\n", best_ir, repeat);
  std::printf("peak RSS GiB        %.3f (process, all repeats)\n", peak_rss_gib());
  return 0;
}
