// paralab tests — model presets are data, load, build, and have the published sizes.
#include <catch2/catch.hpp>

#include <cmath>

#include "ir/accounting.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/step_ir.hpp"
#include "test_util.hpp"

using namespace paralab;

namespace {
// TP8 with sequence parallelism (which Megatron requires of MoE models with TP > 1).
Scenario preset_scenario(const std::string& preset, const std::vector<std::string>& sets = {}) {
  return test::scenario_from("[model]\npreset = \"" + preset +
                                 "\"\n[training]\nglobal_batch_size = 8\n[parallel]\ntensor = 8\nsequence_parallel = true\n"
                                 "[cluster]\ntopology = \"dgx-a100\"\nnodes = 1\n",
                             sets);
}
}  // namespace

TEST_CASE("every shipped preset loads", "[ir][presets]") {
  const auto presets = shipped_presets();
  REQUIRE(presets.size() >= 20);
  for (const auto& p : presets) {
    INFO(p);
    const bool tiny = p.rfind("tiny", 0) == 0;
    const bool four_kv_heads = p.rfind("qwen3", 0) == 0;  // TP at most the 4 KV heads
    auto s = preset_scenario(p, tiny            ? std::vector<std::string>{"parallel.tensor=2", "cluster.devices_per_node=2"}
                                : four_kv_heads ? std::vector<std::string>{"parallel.tensor=4"}
                                                : std::vector<std::string>{});
    CHECK(s.model.preset == p);
    CHECK(ModelShape::from(s).total_params() > 0);
  }
}

// Narayanan et al. 2021, Sec. 3 / Appendix: P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)) for
// the GPT models with tied embeddings and learned positions (the final norm's 2h is not in it).
TEST_CASE("GPT preset parameter counts follow Narayanan et al.'s formula", "[ir][presets]") {
  for (const char* p : {"gpt-1.7b", "gpt-3.6b", "gpt-7.5b", "gpt-18.4b", "gpt-39.1b", "gpt-76.1b", "gpt-145.6b",
                        "gpt-310.1b", "gpt-530b", "gpt-1t", "gpt-22b", "gpt3-175b"}) {
    INFO(p);
    const Scenario s = preset_scenario(p);
    const double l = static_cast<double>(s.model.num_layers), h = static_cast<double>(s.model.hidden_size);
    const double V = 51200, seq = 2048;
    const double formula = 12 * l * h * h * (1 + 13 / (12 * h) + (V + seq) / (12 * l * h));
    const double ours = static_cast<double>(ModelShape::from(s).total_params());
    CHECK(ours - 2 * h == Approx(formula).epsilon(1e-12));
  }
}

TEST_CASE("GPT-3 175B in Megatron's configuration has 174.6B parameters", "[ir][presets]") {
  // Korthikanti et al. 2022, Table 3; Narayanan et al. 2021 report 174.6B for this shape.
  const Scenario s = preset_scenario("gpt3-175b");
  const double billions = static_cast<double>(ModelShape::from(s).total_params()) / 1e9;
  CHECK(std::round(billions * 10) / 10 == Approx(174.6));
}

TEST_CASE("Llama presets have their published parameter counts", "[ir][presets]") {
  // Touvron et al. 2023 (Llama 2) and the Llama 3 paper: 6.74B, 13.0B, 69.0B, 8.03B, 70.6B, 405.9B;
  // Llama 3.2 1B's released checkpoint holds 1,235,814,400 parameters (tied embeddings).
  struct Case {
    const char* preset;
    double billions;
  } cases[] = {{"llama2-7b", 6.74}, {"llama2-13b", 13.02}, {"llama2-70b", 68.98},
               {"llama3-8b", 8.03}, {"llama3-70b", 70.55}, {"llama3-405b", 405.85},
               {"llama3.2-1b", 1.2358}};
  for (const auto& c : cases) {
    INFO(c.preset);
    // tensor = 1 so Megatron's vocabulary padding (to 128 * tp) does not add rows.
    const Scenario s = preset_scenario(c.preset, {"parallel.tensor=1"});
    CHECK(static_cast<double>(ModelShape::from(s).total_params()) / 1e9 == Approx(c.billions).epsilon(0.002));
  }
}

TEST_CASE("Megatron pads the vocabulary to a multiple of 128 * tp", "[ir][presets]") {
  const Scenario s = preset_scenario("llama2-7b");  // vocab 32000, tp 8 -> 32768
  CHECK(s.model.padded_vocab(8) == 32768);
  CHECK(s.model.padded_vocab(1) == 32000);
}

TEST_CASE("any preset key can be overridden", "[ir][presets]") {
  const Scenario s = preset_scenario("gpt3-175b", {"model.num_layers=48", "model.seq_length=4096"});
  CHECK(s.model.num_layers == 48);
  CHECK(s.model.seq_length == 4096);
  CHECK(s.model.hidden_size == 12288);
}
