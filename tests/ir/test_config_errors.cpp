// paralab tests — every kind of bad input is refused with a ConfigError that names the file,
// the line, the key, the bad value and what is allowed.
#include <catch2/catch.hpp>

#include <algorithm>

#include <stdexcept>
#include <string>

#include "ir/enum_names.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/topology_loader.hpp"
#include "test_util.hpp"

using paralab::ConfigError;
using paralab::test::TempFile;

namespace {

struct Expect {
  std::string key;        // must appear in the error's key
  int line = -1;          // expected line (-1: don't check; 0: no line)
  std::string value;      // substring of the value
  std::string allowed;    // substring of "allowed"
  std::string problem;    // substring of the problem
};

void expect_error(const std::string& toml, const Expect& e, const std::vector<std::string>& sets = {}) {
  TempFile f(toml);
  try {
    paralab::load_scenario(f.path(), sets);
    FAIL("expected a ConfigError for key " << e.key);
  } catch (const ConfigError& err) {
    INFO("message: " << err.what());
    CHECK(err.key().find(e.key) != std::string::npos);
    if (e.line >= 0) CHECK(err.loc().line == e.line);
    if (sets.empty()) CHECK(err.loc().file.find(f.path().string()) != std::string::npos);
    if (!e.value.empty()) CHECK(err.value().find(e.value) != std::string::npos);
    if (!e.allowed.empty()) CHECK(err.allowed().find(e.allowed) != std::string::npos);
    if (!e.problem.empty()) CHECK(err.problem().find(e.problem) != std::string::npos);
    // The message carries all of it.
    CHECK(std::string(err.what()).find(e.key) != std::string::npos);
  }
}

const std::string kBase = paralab::test::tiny_gpt();

}  // namespace

TEST_CASE("a valid scenario loads", "[ir][config]") {
  auto s = paralab::test::scenario_from(kBase);
  CHECK(s.model.num_layers == 8);
  CHECK(s.parallel.data == 8);  // inferred: 8 GPUs / (tp 1 * pp 1 * cp 1)
  CHECK(s.world_size() == 8);
}

TEST_CASE("syntax errors name the line", "[ir][config]") {
  expect_error("[model]\npreset = \"tiny\"\nnum_layers = = 3\n", {"", 3, "", "", "TOML syntax error"});
}

TEST_CASE("unknown keys and sections are refused with the allowed keys", "[ir][config]") {
  expect_error(kBase + "[model]\n", {"", -1, "", "", ""});  // duplicate table is a TOML error
  expect_error("[model]\npreset = \"tiny\"\nnum_layer = 4\n[training]\nglobal_batch_size = 8\n[cluster]\ntopology = \"dgx-a100\"\n",
               {"model.num_layer", 3, "4", "model.num_layers", "unknown key"});
  expect_error(kBase + "[optimizer]\nlr = 1\n", {"optimizer.lr", 13, "1", "[model]", "unknown key"});
}

TEST_CASE("wrong types are refused", "[ir][config]") {
  expect_error("[model]\npreset = \"tiny\"\nhidden_size = \"big\"\n[training]\nglobal_batch_size = 8\n[cluster]\ntopology = \"dgx-a100\"\n",
               {"model.hidden_size", 3, "big", "integer", "expected an integer"});
  expect_error(kBase, {"parallel.sequence_parallel", 0, "1", "true | false", "expected a boolean"},
               {"parallel.sequence_parallel=1"});
  expect_error(kBase, {"model.activation", 0, "relu", "gelu | swiglu", "unknown value"}, {"model.activation=relu"});
}

TEST_CASE("zero, negative and absurd sizes are refused", "[ir][config]") {
  expect_error(kBase, {"model.hidden_size", 0, "0", "from 1", "must be positive"}, {"model.hidden_size=0"});
  expect_error(kBase, {"model.num_layers", 0, "-4", "from 1", ""}, {"model.num_layers=-4"});
  expect_error(kBase, {"model.hidden_size", 0, "1000000000", "to 1048576", "out of range"}, {"model.hidden_size=1000000000"});
  expect_error(kBase, {"training.micro_batch_size", 0, "0", "", ""}, {"training.micro_batch_size=0"});
  expect_error(kBase, {"cluster.nodes", 0, "0", "", ""}, {"cluster.nodes=0"});
  expect_error(kBase, {"model.hidden_dropout", 0, "1.5", "<= 0.999", "out of range"}, {"model.hidden_dropout=1.5"});
}

TEST_CASE("tensor parallelism must divide heads, query groups, hidden and FFN sizes", "[ir][config]") {
  // tiny: 4 heads, hidden 64, ffn 256.
  expect_error(kBase, {"parallel.tensor", 0, "3", "1, 2, 4", "num_attention_heads"}, {"parallel.tensor=3"});
  expect_error(kBase, {"parallel.tensor", 0, "4", "1, 2", "num_query_groups"},
               {"parallel.tensor=4", "model.num_query_groups=2"});
  expect_error(kBase, {"parallel.tensor", 0, "4", "", "ffn_hidden_size"},
               {"parallel.tensor=4", "model.ffn_hidden_size=254"});
  expect_error(kBase, {"parallel.tensor", 0, "8", "", "num_attention_heads"}, {"parallel.tensor=8"});
  expect_error(kBase, {"model.num_query_groups", 0, "3", "1, 2, 4", "num_attention_heads"}, {"model.num_query_groups=3"});
}

TEST_CASE("the line of a bad key is reported from the file", "[ir][config]") {
  expect_error("[model]\npreset = \"tiny\"\n[training]\nglobal_batch_size = 8\n[parallel]\ntensor = 3\n[cluster]\ntopology = \"dgx-a100\"\n",
               {"parallel.tensor", 6, "3", "1, 2, 4", ""});
}

TEST_CASE("pipeline stages must divide layers, virtual stages the layers per stage", "[ir][config]") {
  expect_error(kBase, {"parallel.pipeline", 0, "3", "1, 2, 4, 8", "num_layers"}, {"parallel.pipeline=3"});
  expect_error(kBase, {"parallel.virtual_pipeline_stages", 0, "3", "1, 2, 4", "layers per pipeline stage"},
               {"parallel.pipeline=2", "parallel.virtual_pipeline_stages=3", "parallel.schedule=interleaved"});
  expect_error(kBase, {"parallel.virtual_pipeline_stages", 0, "2", "interleaved", ""},
               {"parallel.pipeline=2", "parallel.virtual_pipeline_stages=2"});
  expect_error(kBase, {"parallel.schedule", 0, "interleaved", "", "virtual_pipeline_stages"},
               {"parallel.pipeline=2", "parallel.schedule=interleaved"});
}

TEST_CASE("tp*pp*cp*dp must equal the cluster's GPUs", "[ir][config]") {
  expect_error(kBase, {"parallel.data", 0, "3", "8", "not the cluster's 8 devices"}, {"parallel.data=3"});
  expect_error(kBase, {"parallel.data", 0, "", "nodes*devices_per_node", "does not divide"},
               {"parallel.pipeline=1", "parallel.tensor=1", "parallel.context=1", "cluster.devices_per_node=3",
                "parallel.tensor=2"});
}

TEST_CASE("the global batch must be divisible by micro-batch times data parallelism", "[ir][config]") {
  expect_error(kBase, {"training.global_batch_size", 0, "12", "a multiple of 16", "micro_batch_size*data"},
               {"training.global_batch_size=12", "training.micro_batch_size=2"});
}

TEST_CASE("the sequence must be divisible by context parallelism", "[ir][config]") {
  expect_error(kBase, {"parallel.context", 0, "4", "1, 2, 3", "seq_length"}, {"model.seq_length=66", "parallel.context=4"});
}

TEST_CASE("the sequence must split into two chunks per context-parallel rank", "[ir][config]") {
  // 66 = 2 x 33: context 2 divides it, but the load-balanced split needs 4 equal chunks.
  expect_error(kBase, {"parallel.context", 0, "2", "2 x context divides seq_length", "equal chunks"},
               {"model.seq_length=66", "parallel.context=2"});
}

TEST_CASE("context parallelism needs fused attention", "[ir][config]") {
  expect_error(kBase, {"training.attention", 0, "unfused", "flash", ""}, {"parallel.context=2", "training.attention=unfused"});
}

TEST_CASE("unknown presets list the shipped ones", "[ir][config]") {
  expect_error("[model]\npreset = \"gpt5\"\n[training]\nglobal_batch_size = 8\n[cluster]\ntopology = \"dgx-a100\"\n",
               {"model.preset", 2, "gpt5", "gpt3-175b", "unknown preset"});
}

TEST_CASE("missing required keys are named", "[ir][config]") {
  expect_error("[model]\npreset = \"tiny\"\n[cluster]\ntopology = \"dgx-a100\"\n",
               {"training.global_batch_size", 0, "", "", "required key is missing"});
  expect_error("[model]\nnum_layers = 2\n[training]\nglobal_batch_size = 8\n[cluster]\ntopology = \"dgx-a100\"\n",
               {"model.hidden_size", 0, "", "", "required key is missing"});
}

TEST_CASE("missing or unreadable topologies are refused", "[ir][config]") {
  expect_error("[model]\npreset = \"tiny\"\n[training]\nglobal_batch_size = 8\n[cluster]\ntopology = \"dgx-z900\"\n",
               {"cluster.topology", 6, "dgx-z900", "dgx-a100", "unknown topology"});
  expect_error("[model]\npreset = \"tiny\"\n[training]\nglobal_batch_size = 8\n[cluster]\ntopology = \"nowhere/x.toml\"\n",
               {"cluster.topology", 6, "nowhere/x.toml", ".toml", "not found"});
  // A directory where the file should be: not a readable file.
  TempFile t("x");
  std::filesystem::create_directories(t.dir() / "dir.toml");
  expect_error("[model]\npreset = \"tiny\"\n[training]\nglobal_batch_size = 8\n[cluster]\ntopology = \"" +
                   (t.dir() / "dir.toml").string() + "\"\n",
               {"cluster.topology", 6, "dir.toml", "", "not found"});
}

TEST_CASE("bad topology files name their own file, line and key", "[ir][config]") {
  TempFile topo("name = \"x\"\n[device]\nkind = \"gpu\"\npeak_fp32_tflops = 10\nmemory_gib = 80\nmem_bw_gbps = 1000\n"
                "bogus = 1\n[node]\ndevices_per_node = 8\nintra = \"nvswitch\"\nintra_bw_gbps = 100\n",
                "topo.toml");
  const std::string scen = "[model]\npreset = \"tiny\"\n[training]\nglobal_batch_size = 8\n[cluster]\ntopology = \"" +
                           topo.path().string() + "\"\n";
  TempFile f(scen);
  try {
    paralab::load_scenario(f.path());
    FAIL("expected an error");
  } catch (const ConfigError& e) {
    CHECK(e.key() == "device.bogus");
    CHECK(e.loc().line == 7);
    CHECK(e.loc().file == topo.path().string());
  }
  // Topology overrides go through --set topology.section.key=value and are checked too.
  expect_error(kBase, {"device.mem_bw_gbps", 0, "-1", "", "out of range"}, {"topology.device.mem_bw_gbps=-1"});
}

namespace {

// A CPU topology's required keys (10 lines): the [[calibration.*]] tests append their entries.
const std::string kCpuTopologyHead =
    "name = \"x\"\n[device]\nkind = \"cpu\"\npeak_fp32_tflops = 0.1\nmemory_gib = 8\nmem_bw_gbps = 10\n"
    "[node]\ndevices_per_node = 2\nintra = \"shm\"\nintra_bw_gbps = 5\n";

paralab::Topology load_topology_text(const std::string& toml) {
  TempFile f(toml, "topo.toml");
  return paralab::load_topology(f.path());
}

// The ConfigError loading `toml` throws (the test fails when it loads).
ConfigError topology_error(const std::string& toml) {
  try {
    load_topology_text(toml);
  } catch (const ConfigError& e) {
    return e;
  }
  FAIL("expected a ConfigError for " << toml);
  throw std::logic_error("unreachable: FAIL throws");
}

}  // namespace

// [[calibration.execution]]: what `paralab validate` holds its executions against (a
// calibration's executed steps). Complete entries load; a missing field, an unknown key or a
// median outside [min, max] is refused with the entry's line.
TEST_CASE("a calibration's executions load and bad ones are refused", "[ir][config]") {
  const std::string head = std::string(kCpuTopologyHead) + "[calibration]\nschema_version = 2\n";
  const int entry_line = static_cast<int>(std::count(head.begin(), head.end(), '\n')) + 2;  // its first key
  const auto load = load_topology_text;
  const paralab::Topology t = load(head + "[[calibration.execution]]\nscenario = \"cpu-tp2\"\ndigest = \"af76\"\n"
                                          "executions = 10\nstep_median_s = 0.016\nstep_min_s = 0.015\nstep_max_s = 0.019\n");
  REQUIRE(t.calibration.executions.size() == 1);
  const paralab::ExecutionPoint& e = t.calibration.executions[0];
  CHECK(e.scenario == "cpu-tp2");
  CHECK(e.digest == "af76");
  CHECK(e.executions == 10);
  CHECK(e.step_median_s == 0.016);
  CHECK(e.step_min_s == 0.015);
  CHECK(e.step_max_s == 0.019);
  CHECK(t.calibration.empty());  // no compute points, no corrections: the model keeps its formulas
  const paralab::Topology alone = load(head + "[[calibration.execution]]\nscenario = \"a\"\ndigest = \"d\"\n"
                                              "executions = 12\nstep_median_s = 0.01\n");
  CHECK(alone.calibration.executions.at(0).step_min_s == 0.01);  // not given: the median
  CHECK(alone.calibration.executions.at(0).step_max_s == 0.01);

  const auto refused = [&](const std::string& entry, const std::string& key, int line, const std::string& problem) {
    const ConfigError err = topology_error(head + "[[calibration.execution]]\n" + entry);
    INFO("message: " << err.what());
    CHECK(err.key() == key);
    CHECK(err.loc().line == line);
    CHECK(err.problem().find(problem) != std::string::npos);
  };
  refused("scenario = \"a\"\nexecutions = 3\nstep_median_s = 0.01\n", "calibration.execution.digest", entry_line, "missing");
  refused("scenario = \"a\"\ndigest = \"d\"\nexecutions = 3\nstep_mean_s = 0.01\n", "calibration.execution.step_mean_s",
          entry_line + 3, "unknown key");
  refused("scenario = \"a\"\ndigest = \"d\"\nexecutions = 3\nstep_median_s = 0.01\nstep_max_s = 0.005\n",
          "calibration.execution.step_median_s", entry_line + 3, "outside");
  // Schema 1's keys are gone: an execution's launches, a [[calibration.call]].
  refused("scenario = \"a\"\ndigest = \"d\"\nexecutions = 3\nlaunches = 2\nstep_median_s = 0.01\n",
          "calibration.execution.launches", entry_line + 3, "unknown key");
}

TEST_CASE("overrides must be section.key=value", "[ir][config]") {
  expect_error(kBase, {"parallel.tensor", 0, "", "--set section.key=value", "must look like"}, {"parallel.tensor"});
}

TEST_CASE("a precision the device lacks is refused", "[ir][config]") {
  expect_error(kBase, {"training.precision", 0, "fp8", "", "no fp8 peak"}, {"training.precision=fp8"});
  auto s = paralab::test::scenario_from(kBase, {"cluster.topology=dgx-h100", "training.precision=fp8"});
  CHECK(s.training.precision == paralab::Precision::fp8);
}

TEST_CASE("overrides given with --set replace preset and file values", "[ir][config]") {
  auto s = paralab::test::scenario_from(kBase, {"model.num_layers=4", "parallel.tensor=2", "training.recompute=full"});
  CHECK(s.model.num_layers == 4);
  CHECK(s.parallel.tensor == 2);
  CHECK(s.parallel.data == 4);
  CHECK(s.training.recompute == paralab::Recompute::full);
}

TEST_CASE("uneven pipelines follow Megatron's first/last stage keys", "[ir][config]") {
  // 8 layers over 3 stages: 2 + 3 + 3.
  auto s = paralab::test::scenario_from(kBase, {"parallel.pipeline=3", "parallel.decoder_first_pipeline_num_layers=2",
                                                "cluster.devices_per_node=6", "training.global_batch_size=4"});
  CHECK(s.parallel.pipeline == 3);
  expect_error(kBase, {"parallel.decoder_first_pipeline_num_layers", 0, "3", "", "do not split evenly"},
               {"parallel.pipeline=3", "parallel.decoder_first_pipeline_num_layers=3", "cluster.devices_per_node=6"});
}

TEST_CASE("block-scaled precisions need a device that has them", "[ir][config]") {
  for (const char* p : {"mxfp8", "nvfp4"}) {
    INFO(p);
    expect_error(kBase, {"training.precision", 0, p, "a precision the device supports", std::string("no ") + p + " peak"},
                 {std::string("training.precision=") + p});
    const std::string blackwell = kBase.substr(0, kBase.find("topology")) + "topology = \"dgx-b200\"\nnodes = 1\n";
    TempFile f(blackwell);
    CHECK(paralab::load_scenario(f.path(), {std::string("training.precision=") + p}).training.precision ==
          *paralab::enum_from_string<paralab::Precision>(p));
  }
}
