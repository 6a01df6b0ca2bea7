// paralab tests — the layer split over pipeline stages as Megatron-LM makes it: the embedding
// and loss counted as layers, pipeline_model_parallel_layout strings, the combinations Megatron
// refuses, the hints of a split that does not divide, and Megatron's [parallel] key names.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "ir/partition.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/step_ir.hpp"
#include "test_util.hpp"

using paralab::ConfigError;
using paralab::test::scenario_from;

namespace {

const std::string kBase = paralab::test::tiny_gpt();  // 8 layers

ConfigError error_of(const std::vector<std::string>& sets, const std::string& toml = kBase) {
  return paralab::test::config_error_of(toml, sets);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Layers of every virtual stage, in order, as (first_layer, num_layers) from stage_chunks.
std::vector<std::pair<int64_t, int64_t>> chunks_by_virtual_stage(const paralab::Scenario& s) {
  const int64_t p = s.parallel.pipeline, v = s.parallel.virtual_pipeline_stages;
  std::vector<std::pair<int64_t, int64_t>> out(static_cast<size_t>(p * v));
  for (int64_t st = 0; st < p; ++st)
    for (const auto& c : paralab::stage_chunks(s, st)) {
      out[static_cast<size_t>(c.virtual_stage)] = {c.first_layer, c.num_layers};
      CHECK(c.embedding == (c.virtual_stage == 0));
      CHECK(c.head == (c.virtual_stage == p * v - 1));
    }
  return out;
}

// Transformer layers whose forward ops stage `st` of the IR holds.
std::set<int32_t> layers_in(const paralab::StepIR& ir, int64_t st) {
  std::set<int32_t> out;
  for (const auto& op : ir.stages[static_cast<size_t>(st)].ops)
    if (op.layer >= 0 && op.layer < ir.scenario.model.num_layers) out.insert(op.layer);
  return out;
}

}  // namespace

TEST_CASE("embedding and loss counted as layers split as Megatron-LM does", "[ir][pipeline]") {
  // 8 layers + embedding + loss = 10 over 5 stages: 1, 2, 2, 2, 1 transformer layers.
  auto s = scenario_from(kBase, {"parallel.pipeline=5", "cluster.devices_per_node=5", "training.global_batch_size=5",
                                 "parallel.account_for_embedding_in_pipeline_split=true",
                                 "parallel.account_for_loss_in_pipeline_split=true"});
  using P = std::pair<int64_t, int64_t>;
  CHECK(chunks_by_virtual_stage(s) == std::vector<P>{{0, 1}, {1, 2}, {3, 2}, {5, 2}, {7, 1}});
  const auto ir = paralab::build_step_ir(s);
  CHECK(layers_in(ir, 0) == std::set<int32_t>{0});
  CHECK(layers_in(ir, 4) == std::set<int32_t>{7});

  // Embedding only: 9 over 3 stages, 2 + 3 + 3.
  s = scenario_from(kBase, {"parallel.pipeline=3", "cluster.devices_per_node=3", "training.global_batch_size=3",
                            "parallel.account_for_embedding_in_pipeline_split=true"});
  CHECK(chunks_by_virtual_stage(s) == std::vector<P>{{0, 2}, {2, 3}, {5, 3}});

  // With virtual stages, 10 over 5 x 2: the first virtual stage holds only the embedding and the
  // last only the final norm, output layer and loss.
  s = scenario_from(kBase, {"parallel.pipeline=5", "cluster.devices_per_node=5", "training.global_batch_size=10",
                            "parallel.virtual_pipeline_stages=2", "parallel.schedule=\"interleaved\"",
                            "parallel.account_for_embedding_in_pipeline_split=true",
                            "parallel.account_for_loss_in_pipeline_split=true"});
  const auto v = chunks_by_virtual_stage(s);
  CHECK(v.front() == P{0, 0});
  CHECK(v.back() == P{8, 0});
  const auto ir2 = paralab::build_step_ir(s);
  CHECK(layers_in(ir2, 0) == std::set<int32_t>{4});   // chunk 0 empty, chunk 1 = virtual stage 5
  CHECK(layers_in(ir2, 4) == std::set<int32_t>{3});   // chunk 1 = virtual stage 9, empty
}

TEST_CASE("a split that does not divide names the keys that would make it valid", "[ir][pipeline]") {
  // 8 layers on 3 stages: 9 with the embedding counted.
  ConfigError e = error_of({"parallel.pipeline=3", "cluster.devices_per_node=3"});
  CHECK(e.key() == "parallel.pipeline");
  CHECK(has(e.allowed(), "account_for_embedding_in_pipeline_split = true"));
  CHECK(has(e.allowed(), "pipeline_model_parallel_layout"));
  // 8 on 5: 10 with both counted; 3 + 3 x 2... no: first = last = 1 leaves 6 = 3 x 2.
  e = error_of({"parallel.pipeline=5", "cluster.devices_per_node=5"});
  CHECK(has(e.allowed(), "account_for_loss_in_pipeline_split = true (10 = 5 x 2"));
  CHECK(has(e.allowed(), "decoder_last_pipeline_num_layers = 1 (2 on each middle stage)"));
  // Counted, and still not dividing: the message says what was counted.
  e = error_of({"parallel.pipeline=4", "cluster.devices_per_node=4", "parallel.account_for_loss_in_pipeline_split=true"});
  CHECK(has(e.problem(), "8 layers + loss = 9"));
  e = error_of({"parallel.pipeline=2", "cluster.devices_per_node=2", "parallel.virtual_pipeline_stages=4",
                "parallel.schedule=\"interleaved\"", "parallel.account_for_embedding_in_pipeline_split=true",
                "parallel.account_for_loss_in_pipeline_split=true"});
  CHECK(e.key() == "parallel.virtual_pipeline_stages");
}

TEST_CASE("combinations Megatron-LM refuses are refused with its reason", "[ir][pipeline]") {
  ConfigError e = error_of({"parallel.pipeline=3", "cluster.devices_per_node=3", "parallel.decoder_first_pipeline_num_layers=2",
                            "parallel.account_for_loss_in_pipeline_split=true"});
  CHECK(e.key() == "parallel.decoder_first_pipeline_num_layers");
  CHECK(has(e.problem(), "cannot be set at the same time with account_for_embedding_in_pipeline_split"));
  e = error_of({"parallel.pipeline=2", "cluster.devices_per_node=2", "parallel.pipeline_model_parallel_layout=\"Etttt|ttttL\"",
                "parallel.decoder_first_pipeline_num_layers=4"});
  CHECK(e.key() == "parallel.pipeline_model_parallel_layout");
  e = error_of({"parallel.pipeline=2", "cluster.devices_per_node=2", "parallel.pipeline_model_parallel_layout=\"Etttt|ttttL\"",
                "parallel.account_for_embedding_in_pipeline_split=true"});
  CHECK(has(e.problem(), "places the embedding (E) and loss (L) itself"));
}

TEST_CASE("pipeline_model_parallel_layout places every layer", "[ir][pipeline]") {
  using P = std::pair<int64_t, int64_t>;
  const std::vector<std::string> two = {"parallel.pipeline=2", "cluster.devices_per_node=2", "training.global_batch_size=4"};
  auto with = [&](std::vector<std::string> sets, const std::string& layout) {
    sets.push_back("parallel.pipeline_model_parallel_layout=\"" + layout + "\"");
    return sets;
  };
  // Uneven, with Megatron's repeat syntax: "Et*3|t*5,L" is E ttt | ttttt L.
  auto s = scenario_from(kBase, with(two, "Et*3|t*5,L"));
  CHECK(chunks_by_virtual_stage(s) == std::vector<P>{{0, 3}, {3, 5}});
  // Four stages on two ranks: two chunks each, in virtual-stage order (chunk-major).
  s = scenario_from(kBase, with({"parallel.pipeline=2", "cluster.devices_per_node=2", "training.global_batch_size=4",
                                 "parallel.schedule=\"interleaved\""},
                                "Et|(tt|)*2,tttL"));
  CHECK(s.parallel.virtual_pipeline_stages == 2);
  CHECK(chunks_by_virtual_stage(s) == std::vector<P>{{0, 1}, {1, 2}, {3, 2}, {5, 3}});
  const auto ir = paralab::build_step_ir(s);
  CHECK(layers_in(ir, 0) == std::set<int32_t>{0, 3, 4});
  CHECK(layers_in(ir, 1) == std::set<int32_t>{1, 2, 5, 6, 7});
  // An empty middle stage passes activations through.
  s = scenario_from(kBase, with({"parallel.pipeline=3", "cluster.devices_per_node=3", "training.global_batch_size=3"},
                                "Etttt||ttttL"));
  CHECK(chunks_by_virtual_stage(s) == std::vector<P>{{0, 4}, {4, 0}, {4, 4}});
  CHECK(layers_in(paralab::build_step_ir(s), 1).empty());
}

TEST_CASE("bad layouts are refused with Megatron-LM's rule", "[ir][pipeline]") {
  const std::vector<std::string> two = {"parallel.pipeline=2", "cluster.devices_per_node=2"};
  auto problem = [&](const std::string& layout, std::vector<std::string> sets = {}) {
    if (sets.empty()) sets = two;
    sets.push_back("parallel.pipeline_model_parallel_layout=\"" + layout + "\"");
    const ConfigError e = error_of(sets);
    INFO(e.what());
    CHECK((e.key() == "parallel.pipeline_model_parallel_layout" || e.key() == "parallel.virtual_pipeline_stages"));
    return std::string(e.problem());
  };
  CHECK(has(problem("Etttx|ttttL"), "unknown character 'x' at position 5"));
  CHECK(has(problem("E(tt|tttttL"), "without its ')'"));
  CHECK(has(problem("E(tt)|ttttttL"), "must be followed by"));
  CHECK(has(problem("Et*|ttttttttL"), "without a count"));
  CHECK(has(problem(std::string(100, '(') + "Ettttt|tttL"), "nested more than 64 deep"));
  CHECK(has(problem("E(t*9)*999999|L"), "more than 2^20 entries"));
  CHECK(has(problem("Etttt|" + std::string(2048, '|') + "ttttL",
                    {"parallel.pipeline=2", "cluster.devices_per_node=2", "parallel.schedule=\"interleaved\""}),
            "1025 virtual stages per pipeline rank"));
  // Virtual stages a layout sets are blamed on the layout's line.
  const std::string file = kBase.substr(0, kBase.find("pipeline = 1")) +
                           "pipeline = 2\npipeline_model_parallel_layout = \"Etttt|||||ttttL\"\n" +
                           kBase.substr(kBase.find("[cluster]")) + "devices_per_node = 2\n";
  const ConfigError e = error_of({}, file);
  INFO(e.what());
  CHECK(e.key() == "parallel.virtual_pipeline_stages");
  CHECK(e.loc().line == 9);
  CHECK(has(problem("Etttt|tttt"), "loss must be specified exactly once"));
  CHECK(has(problem("EtttEt|ttttL"), "embedding must be specified exactly once"));
  CHECK(has(problem("tEttt|ttttL"), "the first layer must be embedding"));
  CHECK(has(problem("Etttt|ttLtt"), "the last layer must be loss"));
  CHECK(has(problem("Ettt|ttttL"), "decoder layers (t: 7) must match num_layers (8)"));
  CHECK(has(problem("Etttt|ttttmL"), "mtp_num_layers"));
  CHECK(has(problem("Ett|ttt|tttL"), "divisible by pipeline_model_parallel_size (2)"));
  CHECK(has(problem("Et|ttt|ttt|tL", {"parallel.pipeline=2", "cluster.devices_per_node=2", "parallel.virtual_pipeline_stages=1"}),
            "no more than one of"));
}

TEST_CASE("Megatron-LM's [parallel] argument names are accepted", "[ir][config]") {
  auto s = scenario_from(kBase, {"parallel.tensor_model_parallel_size=2", "parallel.pipeline_model_parallel_size=2",
                                 "parallel.context_parallel_size=2"});
  CHECK(s.parallel.tensor == 2);
  CHECK(s.parallel.pipeline == 2);
  CHECK(s.parallel.context == 2);
  CHECK(s.parallel.data == 1);
  // In the file, overridden by --set under the short name.
  const std::string file = kBase.substr(0, kBase.find("tensor = 1")) + "tensor_model_parallel_size = 4\n" +
                           kBase.substr(kBase.find("pipeline = 1"));
  CHECK(scenario_from(file).parallel.tensor == 4);
  CHECK(scenario_from(file, {"parallel.tensor=2"}).parallel.tensor == 2);
  s = scenario_from(kBase, {"parallel.pipeline=2", "parallel.num_virtual_stages_per_pipeline_rank=2",
                            "parallel.schedule=\"interleaved\""});
  CHECK(s.parallel.virtual_pipeline_stages == 2);
  s = scenario_from(kBase, {"parallel.pipeline=3", "cluster.devices_per_node=3", "parallel.num_layers_in_first_pipeline_stage=2"});
  CHECK(s.parallel.decoder_first_pipeline_num_layers == 2);
  // One key under both names in one place is ambiguous.
  const ConfigError e = error_of({"parallel.tensor=2", "parallel.tensor_model_parallel_size=4"});
  CHECK(e.key() == "parallel.tensor_model_parallel_size");
  CHECK(has(e.problem(), "Megatron-LM's name for parallel.tensor"));
}
