// paralab tests — memory from the IR's events against the published formulas: activations
// per layer (Korthikanti et al. 2022, Table 2) and model states (Rajbhandari et al. 2020, ZeRO).
#include <catch2/catch.hpp>

#include "ir/accounting.hpp"
#include "ir/step_ir.hpp"
#include "test_util.hpp"

using namespace paralab;

namespace {

// One micro-batch through one stage, GPipe, so layer l's saved activations are the growth of
// live activation bytes across its forward pass.
Scenario table2(std::vector<std::string> sets) {
  const std::string base =
      "[model]\nnum_layers = 4\nhidden_size = 512\nnum_attention_heads = 8\nvocab_size = 1024\n"
      "seq_length = 256\nhidden_dropout = 0.1\nattention_dropout = 0.1\n"
      "[training]\nglobal_batch_size = 2\nmicro_batch_size = 2\nprecision = \"bf16\"\nattention = \"unfused\"\n"
      "[parallel]\ntensor = 1\ndata = 1\nschedule = \"gpipe\"\n[cluster]\ntopology = \"dgx-a100\"\nnodes = 1\n";
  sets.push_back("cluster.devices_per_node=" + std::to_string([&] {
    for (const auto& x : sets)
      if (x.rfind("parallel.tensor=", 0) == 0) return std::stoi(x.substr(16));
    return 1;
  }()));
  return test::scenario_from(base, sets);
}

// Live activation bytes after each op, and the last forward op of each layer of micro-batch 0.
double saved_per_layer(const StepIR& ir, int layer) {
  const StepGraph& g = ir.stages[0];
  double live = 0, before = -1, after = -1;
  for (const Op& op : g.ops) {
    for (BufferId b : op.allocs)
      if (g.buffers[b].category == MemCategory::activations) live += static_cast<double>(g.buffers[b].bytes());
    for (BufferId b : op.frees)
      if (g.buffers[b].category == MemCategory::activations) live -= static_cast<double>(g.buffers[b].bytes());
    if (op.phase == Phase::forward && op.layer == layer - 1) before = live;
    if (op.phase == Phase::forward && op.layer == layer) after = live;
  }
  // Norm statistics (2 floats per row, two norms) are real but not in the paper's count.
  const double T_sp = static_cast<double>(ir.shape.tokens_sp());
  const bool stats_kept = ir.scenario.training.recompute != Recompute::full;
  return after - before - (stats_kept ? 2 * 2 * 4 * T_sp : 0.0);
}

}  // namespace

TEST_CASE("activation memory per layer matches Korthikanti et al. 2022 Table 2", "[ir][memory]") {
  const double s = 256, b = 2, h = 512, a = 8;
  const double sbh = s * b * h;
  struct Case {
    const char* name;
    std::vector<std::string> sets;
    double bytes;
  } cases[] = {
      {"no parallelism", {}, sbh * (34 + 5 * a * s / h)},
      {"tensor parallel", {"parallel.tensor=4"}, sbh * (10 + 24.0 / 4 + 5 * a * s / (h * 4))},
      {"tensor + sequence parallel", {"parallel.tensor=4", "parallel.sequence_parallel=true"},
       sbh / 4 * (34 + 5 * a * s / h)},
      {"tensor parallel + selective recompute", {"parallel.tensor=4", "training.recompute=selective"},
       sbh * (10 + 24.0 / 4)},
      {"tensor + sequence parallel + selective recompute",
       {"parallel.tensor=4", "parallel.sequence_parallel=true", "training.recompute=selective"}, sbh * 34 / 4},
      {"full recompute", {"parallel.tensor=4", "training.recompute=full"}, 2 * sbh},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    const StepIR ir = build_step_ir(table2(c.sets));
    CHECK(saved_per_layer(ir, 2) == Approx(c.bytes).epsilon(1e-12));
  }
}

TEST_CASE("model-state memory is ZeRO's (2+2+K) Psi and its stage 1/2/3 divisions", "[ir][memory]") {
  // Rajbhandari et al. 2020, Sec. 3.1 and Fig. 1: mixed-precision Adam keeps 2 Psi of fp16
  // parameters, 2 Psi of fp16 gradients and K Psi = 12 Psi of fp32 optimizer state; stage 1
  // shards the optimizer state over N_d, stage 2 also the gradients, stage 3 also the parameters.
  const std::string base =
      "[model]\npreset = \"tiny\"\n[training]\nglobal_batch_size = 8\nmicro_batch_size = 1\n"
      "[parallel]\ntensor = 1\n[cluster]\ntopology = \"dgx-a100\"\nnodes = 1\n";
  const double N = 8, K = 12;
  for (int zero = 0; zero <= 3; ++zero) {
    INFO("ZeRO stage " << zero);
    const StepIR ir = build_step_ir(test::scenario_from(base, {"parallel.zero_stage=" + std::to_string(zero)}));
    const StepSummary sum = summarize(ir);
    const double psi = static_cast<double>(sum.stages[0].params);
    const auto& res = sum.stages[0].memory.resident;
    const double w = res[static_cast<size_t>(MemCategory::weights)];
    const double g = res[static_cast<size_t>(MemCategory::grads)];
    const double o = res[static_cast<size_t>(MemCategory::optimizer)];
    // Buckets are padded to a multiple of N_d elements: allow that much.
    const double pad = 2 * N * 16 * 8;
    CHECK(w == Approx(2 * psi / (zero >= 3 ? N : 1)).margin(pad));
    CHECK(g == Approx(2 * psi / (zero >= 2 ? N : 1)).margin(pad));
    CHECK(o == Approx(K * psi / (zero >= 1 ? N : 1)).margin(pad * 6));
  }
}

TEST_CASE("fp32 training keeps no master copy", "[ir][memory]") {
  const StepIR ir = build_step_ir(test::scenario_from(test::tiny_gpt(), {"training.precision=fp32"}));
  const StepSummary sum = summarize(ir);
  const double psi = static_cast<double>(sum.stages[0].params);
  const auto& res = sum.stages[0].memory.resident;
  CHECK(res[static_cast<size_t>(MemCategory::weights)] == Approx(4 * psi).margin(1024));
  CHECK(res[static_cast<size_t>(MemCategory::optimizer)] == Approx(8 * psi).margin(4096));  // Adam m, v
}

TEST_CASE("1F1B keeps at most p - s micro-batches of activations on stage s", "[ir][memory]") {
  // Narayanan et al. 2021, Sec. 2.2.1: the first stage stashes p micro-batches.
  const StepIR ir = build_step_ir(test::scenario_from(
      test::tiny_gpt(), {"parallel.pipeline=4", "training.global_batch_size=32", "parallel.data=2",
                         "parallel.tensor=1", "cluster.devices_per_node=8", "model.hidden_dropout=0",
                         "model.attention_dropout=0"}));
  const StepSummary sum = summarize(ir);
  // Stage 0 (4 in flight) holds more than stage 3 (1 in flight), a multiple of the layer part.
  const double a0 = sum.stages[0].memory.peak_activations, a3 = sum.stages[3].memory.peak_activations;
  CHECK(a0 > 2 * a3);
}
