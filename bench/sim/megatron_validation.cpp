// paralab — predicted vs published iteration times of the Megatron-LM papers' runs, on the
// default dgx-a100 topology with no calibration (results: bench/results/sim_megatron_validation.md).
//
//   paralab_megatron_validation [--only NAME] [--interleaved] [--defaults] [--set section.key=value ...]
//
// Narayanan et al. 2021 (SC'21), Table 1: achieved TFLOP/s per GPU; the paper's iteration
// time is its Eq. 3, F = 96 B s l h^2 (1 + s/6h + V/16lh), divided by (TFLOP/s x GPUs); our
// TFLOP/s are the same F over our predicted time. Korthikanti et al. 2022, Table 5: iteration
// times of the "present work" (sequence parallel + selective recomputation) and, in
// parentheses in the paper, the full-recomputation baseline. Base scenarios (configuration as
// the papers ran, assumptions stated): bench/sim/megatron/narayanan2021.toml and
// korthikanti2022.toml. --defaults starts instead from bench/sim/megatron/defaults.toml: the
// papers' model, layout, batch and recomputation (and, for Korthikanti 2022, sequence
// parallelism) with everything else at paralab's defaults (bf16, FlashAttention, overlaps).
// Nothing here is fitted.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ir/scenario_loader.hpp"
#include "ir/step_ir.hpp"
#include "sim/simulate.hpp"

using namespace paralab;

namespace {

struct Row {
  const char* paper;   // "N21" or "K22"
  const char* name;
  const char* preset;
  int64_t tp, pp, gpus, batch;
  double published;    // N21: TFLOP/s per GPU; K22: seconds
  bool full_recompute_baseline = false;  // K22: the parenthesized column
};

const Row kRows[] = {
    {"N21", "1.7B", "gpt-1.7b", 1, 1, 32, 512, 137},
    {"N21", "3.6B", "gpt-3.6b", 2, 1, 64, 512, 138},
    {"N21", "7.5B", "gpt-7.5b", 4, 1, 128, 512, 142},
    {"N21", "18.4B", "gpt-18.4b", 8, 1, 256, 1024, 135},
    {"N21", "39.1B", "gpt-39.1b", 8, 2, 512, 1536, 138},
    {"N21", "76.1B", "gpt-76.1b", 8, 4, 1024, 1792, 140},
    {"N21", "145.6B", "gpt-145.6b", 8, 8, 1536, 2304, 148},
    {"N21", "310.1B", "gpt-310.1b", 8, 16, 1920, 2160, 155},
    {"N21", "529.6B", "gpt-530b", 8, 35, 2520, 2520, 163},
    {"N21", "1008B", "gpt-1t", 8, 64, 3072, 3072, 163},
    {"K22", "22B", "gpt-22b", 8, 1, 8, 4, 1.10},
    {"K22", "175B", "gpt3-175b", 8, 8, 64, 64, 13.75},
    {"K22", "530B", "gpt-530b", 8, 35, 280, 280, 37.83},
    {"K22", "1T", "gpt-1t", 8, 64, 512, 512, 71.49},
    {"K22", "22B", "gpt-22b", 8, 1, 8, 4, 1.42, true},
    {"K22", "175B", "gpt3-175b", 8, 8, 64, 64, 18.13, true},
    {"K22", "530B", "gpt-530b", 8, 35, 280, 280, 49.05, true},
    {"K22", "1T", "gpt-1t", 8, 64, 512, 512, 94.42, true},
};

// Narayanan et al. 2021, Eq. 3 (FLOPs per iteration with full recomputation).
double eq3_flops(const Scenario& s) {
  const double B = static_cast<double>(s.training.global_batch_size), sl = static_cast<double>(s.model.seq_length),
               l = static_cast<double>(s.model.num_layers), h = static_cast<double>(s.model.hidden_size),
               V = static_cast<double>(s.model.vocab_size);
  return 96.0 * B * sl * l * h * h * (1.0 + sl / (6.0 * h) + V / (16.0 * l * h));
}

std::string set(const char* key, const std::string& v) { return std::string(key) + "=" + v; }

}  // namespace

int main(int argc, char** argv) {
  std::string only;
  bool interleaved = false, defaults = false;
  std::vector<std::string> extra;  // --set overrides, applied to every row after its own
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!std::strcmp(argv[i], "--interleaved")) interleaved = true;
    else if (!std::strcmp(argv[i], "--defaults")) defaults = true;
    else if (!std::strcmp(argv[i], "--set") && i + 1 < argc) extra.emplace_back(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--only NAME] [--interleaved] [--defaults] [--set section.key=value ...]\n",
                   argv[0]);
      return 2;
    }
  }
  const std::string dir = std::string(PARALAB_SOURCE_DIR) + "/bench/sim/megatron/";
  std::printf("| paper | model | TP | PP | GPUs | batch | schedule | published | predicted | error | pred. TFLOP/s | "
              "bubble | exposed comm | sim wall |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  double sum_abs = 0, max_abs = 0;
  int n = 0;
  for (const Row& r : kRows) {
    if (!only.empty() && only != r.name) continue;
    const bool n21 = !std::strcmp(r.paper, "N21");
    std::vector<std::string> sets = {
        set("model.preset", r.preset),         set("parallel.tensor", std::to_string(r.tp)),
        set("parallel.pipeline", std::to_string(r.pp)), set("cluster.nodes", std::to_string(r.gpus / 8)),
        set("training.global_batch_size", std::to_string(r.batch)),
    };
    if (defaults) {  // the papers' recomputation (and K22's sequence parallelism), all else default
      const bool present = !n21 && !r.full_recompute_baseline;
      sets.push_back(present ? "training.recompute=selective" : "training.recompute=full");
      sets.push_back(present ? "parallel.sequence_parallel=true" : "parallel.sequence_parallel=false");
    } else if (r.full_recompute_baseline) {
      sets.push_back("training.recompute=full");
      sets.push_back("parallel.sequence_parallel=false");
    }
    // Interleaving (Narayanan et al. Sec. 2.2.2): 2 model chunks per stage where the stage's
    // layers split evenly and the micro-batches are a multiple of the stages (Megatron's rule).
    sets.insert(sets.end(), extra.begin(), extra.end());
    const std::string base = dir + (defaults ? "defaults.toml" : n21 ? "narayanan2021.toml" : "korthikanti2022.toml");
    const Scenario probe = load_scenario(base, sets);
    std::string schedule = "1f1b";
    if (interleaved && r.pp > 1 && (probe.model.num_layers / r.pp) % 2 == 0 && probe.num_microbatches() % r.pp == 0) {
      sets.push_back("parallel.schedule=interleaved");
      sets.push_back("parallel.virtual_pipeline_stages=2");
      schedule = "interleaved v2";
    }
    const Scenario s = load_scenario(base, sets);
    const auto t0 = std::chrono::steady_clock::now();
    const StepIR ir = build_step_ir(s);
    const sim::Simulation sim = sim::simulate(ir);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const StepResult& res = sim.result;
    const double f = eq3_flops(s);
    const double published_s = n21 ? f / (r.published * 1e12 * static_cast<double>(r.gpus)) : r.published;
    const double err = (res.step_time_s - published_s) / published_s * 100;
    double exposed = 0;
    for (double x : res.breakdown.exposed_comm_s) exposed += x;
    char pub[64];
    if (n21) std::snprintf(pub, sizeof pub, "%.2f s (%.0f TFLOP/s)", published_s, r.published);
    else std::snprintf(pub, sizeof pub, "%.2f s%s", published_s, r.full_recompute_baseline ? " (full recompute)" : "");
    std::printf("| %s | %s | %lld | %lld | %lld | %lld | %s | %s | %.2f s | %+.1f %% | %.0f | %.1f %% | %.1f %% | %.1f s |\n",
                n21 ? "Narayanan 2021 T1" : "Korthikanti 2022 T5", r.name, (long long)r.tp, (long long)r.pp,
                (long long)r.gpus, (long long)r.batch, schedule.c_str(), pub, res.step_time_s, err,
                f / res.step_time_s / static_cast<double>(r.gpus) / 1e12, 100 * res.bubble_fraction,
                100 * exposed / res.step_time_s, wall);
    std::fflush(stdout);
    sum_abs += std::abs(err);
    max_abs = std::max(max_abs, std::abs(err));
    ++n;
  }
  if (n) std::printf("\nmean |error| %.1f %%, max |error| %.1f %% over %d rows\n", sum_abs / n, max_abs, n);
  return 0;
}
