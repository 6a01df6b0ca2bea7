// paralab tests — the IR's accounting against the published closed forms.
#include <catch2/catch.hpp>

#include "ir/accounting.hpp"
#include "ir/step_ir.hpp"
#include "test_util.hpp"

using namespace paralab;

namespace {

// A GPT with dropout on one DGX A100 node; the tests vary layout and recomputation.
Scenario gpt(std::vector<std::string> sets) {
  const std::string base =
      "[model]\nnum_layers = 4\nhidden_size = 256\nnum_attention_heads = 8\nvocab_size = 1024\n"
      "seq_length = 128\n[training]\nglobal_batch_size = 32\nmicro_batch_size = 2\n"
      "[parallel]\ntensor = 1\n[cluster]\ntopology = \"dgx-a100\"\nnodes = 1\n";
  return test::scenario_from(base, sets);
}

double model_flops_eq7(const Scenario& s) {
  // Korthikanti et al. 2022, Eq. 7 (model FLOPs per iteration): 72 B s l h^2 (1 + s/6h + V/12lh).
  const double B = static_cast<double>(s.training.global_batch_size), seq = static_cast<double>(s.model.seq_length);
  const double l = static_cast<double>(s.model.num_layers), h = static_cast<double>(s.model.hidden_size);
  const double V = static_cast<double>(s.model.padded_vocab(s.parallel.tensor));
  return 72 * B * seq * l * h * h * (1 + seq / (6 * h) + V / (12 * h * l));
}

}  // namespace

TEST_CASE("model FLOPs per step are Korthikanti et al. Eq. 7, whatever the layout", "[ir][formulas]") {
  for (auto sets : std::vector<std::vector<std::string>>{
           {},
           {"parallel.tensor=2", "parallel.sequence_parallel=true"},
           {"parallel.tensor=2", "parallel.pipeline=2"},
           {"parallel.pipeline=2", "parallel.virtual_pipeline_stages=2", "parallel.schedule=interleaved"},
           {"parallel.context=2"},
           {"parallel.zero_stage=3", "training.recompute=full"},
           {"training.attention=unfused", "training.recompute=selective", "parallel.tensor=4"}}) {
    const Scenario s = gpt(sets);
    INFO(s.parallel.tensor << " " << s.parallel.pipeline << " " << s.parallel.context);
    const StepSummary sum = summarize(build_step_ir(s));
    CHECK(sum.model_flops_per_step == Approx(model_flops_eq7(s)).epsilon(1e-12));
  }
}

TEST_CASE("hardware FLOPs with full recomputation are Narayanan et al. Eq. 3", "[ir][formulas]") {
  // Narayanan et al. 2021, Eq. 3: 96 B s l h^2 (1 + s/6h + V/16lh): every layer's forward runs
  // twice; the output layer is not recomputed. Unfused attention executes exactly the counted
  // matmuls (the fused kernel's backward also recomputes its scores).
  const Scenario s = gpt({"training.recompute=full", "training.attention=unfused", "parallel.tensor=2"});
  const double B = 32, seq = 128, l = 4, h = 256, V = 1024;
  const double eq3 = 96 * B * seq * l * h * h * (1 + seq / (6 * h) + V / (16 * l * h));
  CHECK(summarize(build_step_ir(s)).hardware_flops_per_step == Approx(eq3).epsilon(1e-12));
}

TEST_CASE("selective recomputation adds the attention core's forward", "[ir][formulas]") {
  // Korthikanti et al. 2022, Sec. 5: recomputing QK^T, softmax, dropout and PV costs 4 B s^2 h per layer.
  const Scenario s = gpt({"training.recompute=selective", "training.attention=unfused"});
  const StepSummary sum = summarize(build_step_ir(s));
  const double extra = 4.0 * 32 * 128 * 128 * 256 * 4;
  CHECK(sum.hardware_flops_per_step - sum.model_flops_per_step == Approx(extra).epsilon(1e-12));
}
