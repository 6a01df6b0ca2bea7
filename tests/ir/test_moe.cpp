// paralab tests — mixture-of-experts keys: Megatron's moe_layer_freq, the published parameter
// totals of the MoE presets, the folded expert layout, the combinations Megatron refuses, and
// the routing models.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "ir/accounting.hpp"
#include "ir/expert_layout.hpp"
#include "ir/model_shape.hpp"
#include "ir/moe_routing.hpp"
#include "ir/parameter_count.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/step_ir.hpp"
#include "test_util.hpp"

using namespace paralab;
using paralab::test::scenario_from;

namespace {

// tiny-moe (4 layers, 8 experts, top-2) on 8 ranks of one node.
const std::string kMoE =
    "[model]\npreset = \"tiny-moe\"\n[training]\nglobal_batch_size = 8\n[parallel]\ntensor = 1\n"
    "[cluster]\ntopology = \"dgx-a100\"\nnodes = 1\n";

ConfigError error_of(const std::vector<std::string>& sets, const std::string& toml = kMoE) {
  return paralab::test::config_error_of(toml, sets);
}

Scenario preset(const std::string& name) {
  return scenario_from("[model]\npreset = \"" + name +
                       "\"\n[training]\nglobal_batch_size = 8\n[cluster]\ntopology = \"dgx-h100\"\nnodes = 1\n");
}

}  // namespace

TEST_CASE("moe_layer_freq: an integer or Megatron's list pattern", "[ir][moe]") {
  const SourceLoc at{"t.toml", 3, 1};
  CHECK(parse_moe_layer_freq("1", 3, at, "k") == std::vector<bool>{true, true, true});
  CHECK(parse_moe_layer_freq("2", 5, at, "k") == std::vector<bool>{true, false, true, false, true});
  CHECK(parse_moe_layer_freq("([0]*3+[1]*2)", 5, at, "k") == std::vector<bool>{false, false, false, true, true});
  CHECK(parse_moe_layer_freq("[0, 1]*2 + [1]", 5, at, "k") == std::vector<bool>{false, true, false, true, true});
  for (const char* bad : {"0", "[0]*3+[1]", "[0,2]*2+[1]", "([1]*5", "[1]*5)", "[1]*6", "x", "[1]*0+[1]*5", ""}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_moe_layer_freq(bad, 5, at, "model.moe_layer_freq"), ConfigError);
  }
  try {
    parse_moe_layer_freq("[0]*3+[1]", 5, at, "model.moe_layer_freq");
  } catch (const ConfigError& e) {
    CHECK_THAT(e.what(), Catch::Contains("model.moe_layer_freq") && Catch::Contains("4 entries for 5 layers"));
  }
}

TEST_CASE("MoE presets have their published total and active parameters", "[ir][moe][presets]") {
  // Published totals (billions): Mixtral of Experts Sec. 2; Mistral AI's Mixtral 8x22B post;
  // Qwen3 Technical Report Table 2 / model cards; DeepSeek-V3 report abstract.
  struct Case {
    const char* preset;
    double total, active, tol_active;
  } cases[] = {{"mixtral-8x7b", 46.7, 12.9, 0.01},  {"mixtral-8x22b", 141, 39, 0.01},
               {"qwen3-30b-a3b", 30.5, 3.3, 0.02}, {"qwen3-235b-a22b", 235, 22, 0.01},
               // Qwen3-30B-A3B's "3.3B" and DeepSeek-V3's "37B" activated are rounded down: the
               // shapes give 3.35B and 37.55B (1.6 and 1.5 % above).
               {"deepseek-v3", 671, 37, 0.02}};
  for (const auto& c : cases) {
    INFO(c.preset);
    const Scenario s = preset(c.preset);
    const ParameterCount n = count_parameters(s.model, s.model.vocab_size);
    CHECK(n.total / 1e9 == Approx(c.total).epsilon(0.01));
    CHECK(n.active / 1e9 == Approx(c.active).epsilon(c.tol_active));
  }
  // DeepSeek-V3's MTP module: a 2h x h projection, two norms and one MoE layer (11.6B); the
  // released checkpoint's 14B beside the 671B also holds copies of the embedding and head.
  const Scenario ds = preset("deepseek-v3");
  const ParameterCount n = count_parameters(ds.model, ds.model.vocab_size);
  CHECK(n.mtp / 1e9 + 2 * 129280.0 * 7168 / 1e9 == Approx(14).epsilon(0.05));
  CHECK(n.experts / 1e9 == Approx(58 * 256 * 3 * 7168.0 * 2048 / 1e9));
}

TEST_CASE("the parameter count of a dense model is the IR's", "[ir][moe][presets]") {
  for (const char* p : {"tiny", "tiny-llama", "gpt3-175b", "llama3-8b", "llama2-70b"})
    for (int tp : {1, 2}) {
      INFO(p << " tp " << tp);
      const Scenario s = scenario_from("[model]\npreset = \"" + std::string(p) +
                                       "\"\n[training]\nglobal_batch_size = 8\n[parallel]\ntensor = " + std::to_string(tp) +
                                       "\n[cluster]\ntopology = \"dgx-a100\"\nnodes = 1\n");
      const ParameterCount n = count_parameters(s.model, s.model.padded_vocab(tp));
      CHECK(n.total == ModelShape::from(s).total_params());
      CHECK(n.active == n.total);
      CHECK(n.mtp == 0);
    }
}

TEST_CASE("model FLOPs per token are the IR's on dense models", "[ir][moe][presets]") {
  for (const char* p : {"tiny", "tiny-llama", "llama3-8b", "gpt3-175b"}) {
    INFO(p);
    const Scenario s = scenario_from("[model]\npreset = \"" + std::string(p) +
                                     "\"\n[training]\nglobal_batch_size = 8\n[cluster]\ntopology = \"dgx-a100\"\nnodes = 1\n");
    const double ir = summarize(build_step_ir(s)).model_flops_per_step;
    const double ours = model_flops_per_token(s.model, s.model.padded_vocab(1)) * static_cast<double>(s.tokens_per_step());
    CHECK(ours == Approx(ir).epsilon(1e-9));
  }
  // Mixtral 8x7B (32K sequences): above 6 FLOPs per active weight a token multiplies (the
  // top-2 experts, not all 8), below that plus the attention core over 32K positions.
  const Scenario mx = preset("mixtral-8x7b");
  const double per_token = model_flops_per_token(mx.model, mx.model.vocab_size);
  const ParameterCount n = count_parameters(mx.model, mx.model.vocab_size);
  const double embedding_in = 32000.0 * 4096;
  CHECK(per_token > 6 * (n.active - embedding_in));
  CHECK(per_token < 6 * n.active + 3 * 4.0 * 32768 * 32 * 128 * 32);
}

TEST_CASE("expert layers fold onto each stage's ranks as Megatron's tp-ep-dp order", "[ir][moe][layout]") {
  const Layout dense(2, 1, 4, 2, 8);  // TP2 CP1 DP4 PP2: 8 ranks per stage
  const ExpertLayout a(dense, 1, 4);  // ETP1 EP4 -> EDP2
  CHECK(a.edp() == 2);
  CHECK(a.members(ExpertGroup::ep, 9) == std::vector<int64_t>{8, 9, 10, 11});
  CHECK(a.members(ExpertGroup::edp, 9) == std::vector<int64_t>{9, 13});
  CHECK(a.coord(9) == ExpertCoord{0, 1, 0, 1});
  CHECK(a.first_local_expert(9, 16) == 4);
  const ExpertLayout b(dense, 2, 2);  // ETP2 EP2 -> EDP2
  CHECK(b.members(ExpertGroup::etp, 5) == std::vector<int64_t>{4, 5});
  CHECK(b.members(ExpertGroup::ep, 5) == std::vector<int64_t>{5, 7});
  CHECK(b.members(ExpertGroup::edp, 5) == std::vector<int64_t>{1, 5});
  for (int64_t r = 0; r < dense.world(); ++r) CHECK(b.rank(b.coord(r)) == r);
  CHECK_THROWS_AS(ExpertLayout(dense, 1, 3), InternalError);
}

TEST_CASE("MoE keys load with Megatron's names and defaults", "[ir][moe]") {
  const Scenario s = scenario_from(kMoE, {"parallel.expert_model_parallel_size=4"});
  CHECK(s.parallel.expert == 4);
  CHECK(s.parallel.expert_tensor_size() == 1);
  CHECK(s.model.moe.moe_layers == std::vector<bool>{false, true, true, true});
  CHECK(s.model.moe.moe_ffn_hidden_size == 96);
  const Scenario d = preset("deepseek-v3");
  CHECK(d.model.moe.moe_router_score_function == RouterScore::sigmoid);
  CHECK(d.model.moe.moe_router_load_balancing_type == LoadBalancing::seq_aux_loss);
  CHECK(d.model.mla.q_lora_rank == 1536);
  int64_t moe_layers = 0;
  for (bool b : d.model.moe.moe_layers) moe_layers += b;
  CHECK(moe_layers == 58);
}

TEST_CASE("MoE combinations Megatron refuses are refused with its reason", "[ir][moe][errors]") {
  struct Case {
    std::vector<std::string> sets;
    const char* key;
    const char* says;
  } cases[] = {
      {{"parallel.expert=3"}, "parallel.expert", "does not divide model.num_experts"},
      {{"parallel.expert=8", "parallel.expert_tensor=2"}, "parallel.expert", "does not divide a pipeline stage's ranks"},
      {{"model.moe_router_topk=9"}, "model.moe_router_topk", "more experts than there are"},
      {{"model.moe_router_num_groups=4"}, "model.moe_router_num_groups", "needs both"},
      {{"model.moe_router_num_groups=3", "model.moe_router_group_topk=1"}, "model.moe_router_num_groups", "does not divide"},
      {{"model.moe_router_num_groups=4", "model.moe_router_group_topk=5"}, "model.moe_router_group_topk", "more groups"},
      {{"model.moe_router_num_groups=4", "model.moe_router_group_topk=1", "model.moe_router_topk=3"},
       "model.moe_router_topk", "selected groups"},
      {{"model.moe_router_enable_expert_bias=true"}, "model.moe_router_enable_expert_bias", "sigmoid"},
      {{"model.moe_expert_capacity_factor=1.25", "model.moe_token_dispatcher_type=allgather"},
       "model.moe_expert_capacity_factor", "alltoall"},
      {{"parallel.tensor=2"}, "parallel.sequence_parallel", "sequence parallelism must be used"},
      {{"model.moe_layer_freq=[0]*4"}, "model.moe_layer_freq", "no layer"},
      {{"model.num_experts=0", "parallel.expert=2"}, "parallel.expert", "needs experts"},
      {{"model.num_experts=0", "model.mtp_num_layers=1"}, "model.mtp_num_layers", "only modeled with experts"},
      {{"model.multi_latent_attention=true", "model.position_embedding_type=learned_absolute"},
       "model.position_embedding_type", "RoPE"},
      {{"parallel.expert=2", "parallel.expert_model_parallel_size=2"}, "parallel.expert_model_parallel_size",
       "also set"},
  };
  for (const auto& c : cases) {
    INFO(c.key << " " << c.says);
    const ConfigError e = error_of(c.sets);
    CHECK(e.key() == c.key);
    CHECK_THAT(e.what(), Catch::Contains(c.says));
  }
  CHECK_NOTHROW(scenario_from(kMoE, {"parallel.tensor=2", "parallel.sequence_parallel=true", "parallel.expert=4"}));
}

TEST_CASE("models whose ops are not generated yet are refused by the IR, naming the key", "[ir][moe]") {
  const Scenario s = scenario_from(kMoE);
  try {
    build_step_ir(s);
    FAIL("an MoE model built a step IR");
  } catch (const ConfigError& e) {
    CHECK(e.key() == "model.num_experts");
    CHECK_THAT(e.what(), Catch::Contains("docs/moe.md"));
  }
  const Scenario mla = scenario_from(kMoE, {"model.num_experts=0", "model.multi_latent_attention=true"});
  CHECK_THROWS_AS(build_step_ir(mla), ConfigError);
  CHECK_NOTHROW(build_step_ir(scenario_from(kMoE, {"model.num_experts=0"})));
}

TEST_CASE("routing models: balanced, Zipf, one hot expert, measured counts", "[ir][moe][routing]") {
  MoEConfig e;
  e.num_experts = 8;
  e.moe_router_topk = 2;
  auto sum = [](const std::vector<double>& w) {
    double s = 0;
    for (double x : w) s += x;
    return s;
  };
  // Balanced: every expert 1/8, every EP rank the mean.
  CHECK(routing_load(expert_shares(e, 0), 4).ep_rank_max_over_mean == Approx(1));
  // One hot expert with half the token copies (the most top-2 allows): its EP rank (2 experts)
  // holds 1/2 + 1/14 of the copies against a mean of 1/4.
  e.moe_routing = RoutingModel::hot_expert;
  e.moe_routing_hot_expert_share = 0.5;
  const auto hot = expert_shares(e, 0);
  CHECK(sum(hot) == Approx(1));
  const RoutingLoad h = routing_load(hot, 4);
  CHECK(h.ep_rank_max_over_mean == Approx(4 * (0.5 + 0.5 / 7)));
  CHECK(h.expert_max_over_mean == Approx(4));
  // Zipf: exponent 0 is balanced; a steep one is capped at 1/top-k per expert; the seed moves
  // the hot experts but not the multiset of shares.
  e.moe_routing = RoutingModel::zipf;
  e.moe_routing_zipf_exponent = 0;
  CHECK(routing_load(expert_shares(e, 0), 8).expert_max_over_mean == Approx(1));
  e.moe_routing_zipf_exponent = 3;
  auto z = expert_shares(e, 0);
  CHECK(sum(z) == Approx(1));
  for (double x : z) CHECK(x <= 0.5 + 1e-12);
  CHECK(*std::max_element(z.begin(), z.end()) == Approx(0.5));
  e.moe_routing_seed = 7;
  auto z7 = expert_shares(e, 0);
  CHECK(z7 != z);
  std::sort(z.begin(), z.end());
  std::sort(z7.begin(), z7.end());
  for (size_t i = 0; i < z.size(); ++i) CHECK(z7[i] == Approx(z[i]));
  CHECK(expert_shares(e, 0) == expert_shares(e, 0));  // deterministic
}

TEST_CASE("measured routing counts load from a CSV beside the scenario", "[ir][moe][routing]") {
  test::TempFile counts("# tokens per expert, one row for every MoE layer\n4, 1, 1, 1, 1, 1, 1, 2\n", "counts.csv");
  const Scenario s = scenario_from(kMoE, {"model.moe_routing=measured",
                                          "model.moe_routing_counts_file=" + counts.path().string()});
  REQUIRE(s.model.moe.measured_counts.size() == 1);
  const RoutingLoad l = routing_load(expert_shares(s.model.moe, 2), 4);
  CHECK(l.ep_rank_max_over_mean == Approx(4 * 5.0 / 12));
  CHECK(l.busiest_ep_rank == 0);
  // Errors name the file and line.
  test::TempFile short_row("1, 2, 3\n", "short.csv");
  const ConfigError e1 = error_of({"model.moe_routing=measured", "model.moe_routing_counts_file=" + short_row.path().string()});
  CHECK(e1.key() == "model.moe_routing_counts_file");
  CHECK_THAT(e1.what(), Catch::Contains("short.csv:1") && Catch::Contains("one count per expert"));
  test::TempFile negative("1, 1, 1, 1, -1, 1, 1, 1\n", "negative.csv");
  CHECK_THAT(error_of({"model.moe_routing=measured", "model.moe_routing_counts_file=" + negative.path().string()}).what(),
             Catch::Contains("non-negative"));
  test::TempFile two_rows("1,1,1,1,1,1,1,1\n1,1,1,1,1,1,1,1\n", "two.csv");  // tiny-moe has 3 MoE layers
  CHECK_THAT(error_of({"model.moe_routing=measured", "model.moe_routing_counts_file=" + two_rows.path().string()}).what(),
             Catch::Contains("neither one row nor one per MoE layer"));
  CHECK(error_of({"model.moe_routing=measured"}).key() == "model.moe_routing");
  CHECK(error_of({"model.moe_routing=hot_expert", "model.moe_routing_hot_expert_share=0.75"}).key() ==
        "model.moe_routing_hot_expert_share");
}
