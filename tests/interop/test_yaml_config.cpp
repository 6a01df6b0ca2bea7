// paralab tests — YAML configurations as items: nesting, nulls, sequences, lines, OmegaConf
// interpolations (resolved when they refer to keys or use multiply/sum), and syntax errors.
#include <catch2/catch.hpp>

#include "interop/yaml_config.hpp"
#include "ir/error.hpp"

using paralab::interop::parse_yaml_items;
using paralab::interop::SourceItem;

namespace {

const SourceItem& item(const std::vector<SourceItem>& items, const std::string& name) {
  for (const SourceItem& i : items)
    if (i.name == name) return i;
  FAIL("no item " << name);
  throw std::logic_error("unreachable");
}

const char* kYaml =
    "# a NeMo-like file\n"
    "trainer:\n"
    "  devices: 8\n"
    "  precision: bf16   # comment\n"
    "model:\n"
    "  encoder_seq_length: 2048\n"
    "  max_position_embeddings: ${.encoder_seq_length}\n"
    "  hidden_size: 4096\n"
    "  ffn_hidden_size: ${multiply:4, ${.hidden_size}}\n"
    "  kv_channels: null\n"
    "  num_query_groups: ~\n"
    "  name: \"quoted: text\"\n"
    "  optim:\n"
    "    betas:\n"
    "    - 0.9\n"
    "    - 0.95\n"
    "    up: ${..hidden_size}\n"
    "    sched: {}\n"
    "  data:\n"
    "    seq_length: ${model.encoder_seq_length}\n"
    "    prefix: ???\n"
    "    path: ${data_dir}/x\n"
    "    env: ${oc.env:HOME}\n"
    "  tp: ${training.model.hidden_size}\n"
    "  layers: ${sum:${.hidden_size},-1}\n";

}  // namespace

TEST_CASE("YAML leaves become items with their lines", "[interop][yaml]") {
  const auto items = parse_yaml_items(kYaml, "n.yaml");
  CHECK(item(items, "trainer.devices").values == std::vector<std::string>{"8"});
  CHECK(item(items, "trainer.devices").loc.line == 3);
  CHECK(item(items, "trainer.precision").values[0] == "bf16");
  CHECK(item(items, "model.kv_channels").null);
  CHECK(item(items, "model.num_query_groups").null);
  CHECK(item(items, "model.name").values[0] == "quoted: text");
  const SourceItem& betas = item(items, "model.optim.betas");
  CHECK(betas.sequence);
  CHECK(betas.values == std::vector<std::string>{"0.9", "0.95"});
  CHECK(item(items, "model.optim.sched").values.empty());
  CHECK(items.front().name == "trainer.devices");  // file order
}

TEST_CASE("interpolations to keys, relative and absolute, and multiply/sum resolve", "[interop][yaml]") {
  const auto items = parse_yaml_items(kYaml, "n.yaml");
  CHECK(item(items, "model.max_position_embeddings").values[0] == "2048");
  CHECK(item(items, "model.ffn_hidden_size").values[0] == "16384");
  CHECK(item(items, "model.optim.up").values[0] == "4096");
  CHECK(item(items, "model.data.seq_length").values[0] == "2048");
  CHECK(item(items, "model.tp").values[0] == "4096");  // the launcher's training. prefix
  CHECK(item(items, "model.layers").values[0] == "4095");
  for (const char* n : {"model.max_position_embeddings", "model.ffn_hidden_size", "model.tp"})
    CHECK(item(items, n).unresolved.empty());
}

TEST_CASE("what only NeMo's run knows stays unresolved, with the reason", "[interop][yaml]") {
  const auto items = parse_yaml_items(kYaml, "n.yaml");
  CHECK(item(items, "model.data.prefix").unresolved.find("mandatory") != std::string::npos);
  CHECK(item(items, "model.data.path").unresolved.find("${data_dir} names no key") != std::string::npos);
  CHECK(item(items, "model.data.env").unresolved.find("resolver ${oc.env:HOME}") != std::string::npos);
}

TEST_CASE("YAML syntax errors name the file and line", "[interop][yaml]") {
  CHECK_THROWS_WITH(parse_yaml_items("model:\n  a: 1\n  b: [1, 2\n", "bad.yaml"), Catch::Contains("bad.yaml:") && Catch::Contains("YAML syntax error"));
  CHECK_THROWS_WITH(parse_yaml_items("- a\n- b\n", "list.yaml"), Catch::Contains("list.yaml:1") && Catch::Contains("not a YAML mapping"));
  CHECK_THROWS_WITH(paralab::interop::read_yaml_items("/nonexistent/x.yaml"), Catch::Contains("cannot read"));
}
