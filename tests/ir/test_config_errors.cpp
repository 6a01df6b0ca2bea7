// paralab tests — every kind of bad input is refused with a ConfigError that names the file,
// the line, the key, the bad value and what is allowed.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

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
// calibration's in-situ steps). Complete entries load; a missing field, an unknown key or a
// median outside [min, max] is refused with the entry's line.
TEST_CASE("a calibration's executions load and bad ones are refused", "[ir][config]") {
  const std::string head = kCpuTopologyHead;
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
  CHECK(e.launches == 1);  // not given: the calibration job's own launch
  CHECK(e.step_fast_s == 0.016);  // not given (written before it existed): the median
  CHECK(t.calibration.empty());  // no compute points: the compute model keeps its formulas
  const paralab::Topology spread = load(head + "[[calibration.execution]]\nscenario = \"a\"\ndigest = \"d\"\n"
                                               "executions = 12\nlaunches = 4\nstep_median_s = 0.01\n");
  CHECK(spread.calibration.executions.at(0).launches == 4);
  const paralab::Topology fast = load(head + "[[calibration.execution]]\nscenario = \"a\"\ndigest = \"d\"\n"
                                             "executions = 12\nstep_median_s = 0.01\nstep_fast_s = 0.009\nstep_min_s = 0.008\n");
  CHECK(fast.calibration.executions.at(0).step_fast_s == 0.009);
  try {
    load(head + "[[calibration.execution]]\nscenario = \"a\"\ndigest = \"d\"\nexecutions = 3\nlaunches = 4\nstep_median_s = 0.01\n");
    FAIL("more launches than executions was accepted");
  } catch (const ConfigError& err) {
    CHECK(err.key() == "calibration.execution.launches");
    CHECK(err.problem().find("more launches than executions") != std::string::npos);
    CHECK(err.allowed().find("1 to executions (3)") != std::string::npos);
  }

  const auto refused = [&](const std::string& entry, const std::string& key, int line, const std::string& problem) {
    const ConfigError err = topology_error(head + "[[calibration.execution]]\n" + entry);
    INFO("message: " << err.what());
    CHECK(err.key() == key);
    CHECK(err.loc().line == line);
    CHECK(err.problem().find(problem) != std::string::npos);
    CHECK(err.allowed().find("step_median_s") != std::string::npos);
  };
  refused("scenario = \"a\"\nexecutions = 3\nstep_median_s = 0.01\n", "calibration.execution", 13, "lacks");
  refused("scenario = \"a\"\ndigest = \"d\"\nexecutions = 3\nstep_mean_s = 0.01\n", "calibration.execution.step_mean_s", 15,
          "unknown key");
  refused("scenario = \"a\"\ndigest = \"d\"\nexecutions = 3\nstep_median_s = 0.01\nstep_max_s = 0.005\n",
          "calibration.execution", 13, "outside");
  // The fastest half's median is at most the median.
  refused("scenario = \"a\"\ndigest = \"d\"\nexecutions = 3\nstep_median_s = 0.01\nstep_fast_s = 0.011\nstep_max_s = 0.02\n",
          "calibration.execution.step_fast_s", 13, "outside");
}

// [[calibration.dispatch]]: the dispatch gap by the node's computing ranks. Entries load sorted
// by busy_ranks; a missing field, an unknown key, a bad value or a busy_ranks given twice is
// refused with the entry's line. collectives.poll_yield_us loads; absent, pollers never yield.
TEST_CASE("a calibration's dispatch gaps by busy ranks load and bad ones are refused", "[ir][config]") {
  const std::string head = kCpuTopologyHead;
  const auto load = load_topology_text;
  const paralab::Topology t = load(head + "[collectives]\npoll_spin_us = 500.0\npoll_yield_us = 0.0\n"
                                          "[[calibration.dispatch]]\nbusy_ranks = 3\ndispatch_us = 107.5\n"
                                          "[[calibration.dispatch]]\nbusy_ranks = 1\ndispatch_us = 44.0\n");
  REQUIRE(t.calibration.dispatch.size() == 2);
  CHECK(t.calibration.dispatch[0].busy_ranks == 1);
  CHECK(t.calibration.dispatch[0].dispatch_us == 44.0);
  CHECK(t.calibration.dispatch[1].busy_ranks == 3);
  CHECK(t.calibration.dispatch[1].dispatch_us == 107.5);
  CHECK(t.collectives.poll_yield_us == 0.0);
  CHECK(t.calibration.empty());  // no compute points
  const paralab::Topology plain = load(head);
  CHECK(plain.calibration.dispatch.empty());
  CHECK(plain.collectives.poll_yield_us > 1e300);  // never yields

  const auto refused = [&](const std::string& entries, const std::string& key, int line, const std::string& problem) {
    const ConfigError err = topology_error(head + entries);
    INFO("message: " << err.what());
    CHECK(err.key() == key);
    CHECK(err.loc().line == line);
    CHECK(err.problem().find(problem) != std::string::npos);
  };
  refused("[[calibration.dispatch]]\nbusy_ranks = 2\n", "calibration.dispatch", 12, "lacks");
  refused("[[calibration.dispatch]]\nbusy_ranks = 2\ngap_us = 3.0\n", "calibration.dispatch.gap_us", 13, "unknown key");
  refused("[[calibration.dispatch]]\nbusy_ranks = 0\ndispatch_us = 3.0\n", "calibration.dispatch.busy_ranks", 12, "must be positive");
  refused("[[calibration.dispatch]]\nbusy_ranks = 1\ndispatch_us = -3.0\n", "calibration.dispatch.dispatch_us", 13,
          "out of range");
  refused("[[calibration.dispatch]]\nbusy_ranks = 2\ndispatch_us = 3.0\n[[calibration.dispatch]]\nbusy_ranks = 2\ndispatch_us = 4.0\n",
          "calibration.dispatch.busy_ranks", 15, "same number of busy ranks");
  refused("[collectives]\npoll_yield_us = -1.0\n", "collectives.poll_yield_us", 12, "out of range");
}

// [[calibration.call]]: a collective class's own fixed cost per call (kind, group, phase in the
// trace's spellings). A missing field, an unknown key or value, a negative cost or a class given
// twice is refused with the entry's line and what is allowed.
TEST_CASE("a calibration's per-class call costs load and bad ones are refused", "[ir][config]") {
  const std::string head = kCpuTopologyHead;
  const std::string ag = "[[calibration.call]]\ncollective = \"all_gather\"\ngroup = \"tp\"\nphase = \"fwd\"\nlaunch_lat_us = 61.5\n";
  const paralab::Topology t =
      load_topology_text(head + ag + "[[calibration.call]]\ncollective = \"reduce_scatter\"\ngroup = \"tp\"\nphase = \"bwd\"\nlaunch_lat_us = 140\n");
  REQUIRE(t.calibration.calls.size() == 2);
  CHECK(t.calibration.calls[0].collective == paralab::CollKind::all_gather);
  CHECK(t.calibration.calls[0].group == paralab::GroupKind::tp);
  CHECK(t.calibration.calls[0].phase == paralab::Phase::forward);
  CHECK(t.calibration.calls[0].launch_lat_us == 61.5);
  CHECK(t.calibration.calls[1].collective == paralab::CollKind::reduce_scatter);
  CHECK(t.calibration.calls[1].phase == paralab::Phase::backward);
  CHECK(t.calibration.calls[1].launch_lat_us == 140.0);
  CHECK(t.calibration.calls[0].executed_us == 0.0);  // not recorded
  CHECK(load_topology_text(head).calibration.calls.empty());
  // What the class's calls took in the calibration's executions (validate compares with it).
  CHECK(load_topology_text(head + ag + "executed_us = 66.5\n").calibration.calls[0].executed_us == 66.5);
  // The class's cost for its calls beside compute: 0 (none) unless given, never below launch_lat_us.
  CHECK(t.calibration.calls[0].beside_lat_us == 0.0);
  CHECK(load_topology_text(head + ag + "beside_lat_us = 90\n").calibration.calls[0].beside_lat_us == 90.0);
  CHECK(load_topology_text(head + ag + "beside_lat_us = 61.5\n").calibration.calls[0].beside_lat_us == 61.5);

  const auto refused = [&](const std::string& entries, const std::string& key, int line, const std::string& problem,
                           const std::string& allowed) {
    const ConfigError err = topology_error(head + entries);
    INFO("message: " << err.what());
    CHECK(err.key() == key);
    CHECK(err.loc().line == line);
    CHECK(err.problem().find(problem) != std::string::npos);
    CHECK(err.allowed().find(allowed) != std::string::npos);
  };
  refused("[[calibration.call]]\ncollective = \"all_gather\"\ngroup = \"tp\"\nlaunch_lat_us = 3\n", "calibration.call", 12,
          "lacks", "phase");
  refused("[[calibration.call]]\ncollective = \"allgather\"\ngroup = \"tp\"\nphase = \"fwd\"\nlaunch_lat_us = 3\n",
          "calibration.call.collective", 12, "unknown value", "all_gather | reduce_scatter");
  refused("[[calibration.call]]\ncollective = \"all_gather\"\ngroup = \"tp\"\nphase = \"forward\"\nlaunch_lat_us = 3\n",
          "calibration.call.phase", 14, "unknown value", "fwd | bwd | recompute | optimizer");
  refused("[[calibration.call]]\ncollective = \"all_gather\"\ngroup = \"tp\"\nphase = \"fwd\"\nlaunch_lat_us = -3\n",
          "calibration.call.launch_lat_us", 15, "out of range", "");
  refused("[[calibration.call]]\ncollective = \"all_gather\"\ngroup = \"tp\"\nphase = \"fwd\"\nlat_us = 3\n",
          "calibration.call.lat_us", 15, "unknown key", "launch_lat_us");
  refused(ag + "executed_us = -1\n", "calibration.call.executed_us", 16, "out of range", "");
  refused(ag + "beside_lat_us = 40\n", "calibration.call.beside_lat_us", 16, "below the entry's launch_lat_us",
          "at least launch_lat_us");
  refused(ag + "beside_lat_us = -4\n", "calibration.call.beside_lat_us", 16, "out of range", "");
  refused(ag + ag, "calibration.call", 17, "same collective, group and phase", "each (collective, group, phase) once");
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
