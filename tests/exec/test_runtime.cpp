// tests/exec — the runtime on one rank (no MPI): every op runs once, streams keep program
// order, dependencies are honored, memory follows the IR's events, results come out in the
// simulator's formats with the IR's op ids, --verify passes, and failures (an exception, a
// stuck op behind a dependency) end the run with the rank, the op and the cause.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>

#include "exec/error.hpp"
#include "exec/execute.hpp"
#include "exec_test_util.hpp"
#include "ir/accounting.hpp"
#include "results/result_io.hpp"

using namespace paralab;
using namespace paralab::exec;
using namespace paralab::exec::test;

namespace {

// One-rank variants of the repo's CPU scenarios.
const char* const kOneRank[][2] = {
    {"cpu-1rank-fp16", ""},
    {"cpu-tp2", "parallel.tensor=1"},
    {"cpu-dp2-zero2", "parallel.data=1"},
    {"cpu-tp2-dp2-zero3", "parallel.tensor=1"},
};

StepIR one_rank_ir(const char* name, const char* set) {
  std::vector<std::string> sets{"cluster.devices_per_node=1"};
  if (*set) sets.push_back(set);
  if (std::string(name) == "cpu-tp2-dp2-zero3") sets.push_back("parallel.data=1");
  return build_step_ir(scenario(name, sets));
}

}  // namespace

TEST_CASE("one rank: every op runs once, in stream order, after its dependencies", "[exec][runtime]") {
  for (const auto& sc : kOneRank) {
    CAPTURE(sc[0], sc[1]);
    const StepIR ir = one_rank_ir(sc[0], sc[1]);
    auto world = make_self_transport();
    ExecuteOptions o;
    o.verify = true;
    o.watchdog_s = 30;
    const ExecuteOutcome out = execute(ir, *world, o);
    REQUIRE(out.root);
    CHECK_FALSE(out.verify_failed);
    CHECK(out.verify.total() > 20);
    const StepGraph& g = ir.graph_for(0);
    const StepResult& r = out.result;
    REQUIRE(r.ops.size() == g.ops.size());
    std::map<OpId, OpTiming> t;
    for (const OpTiming& x : r.ops) t[x.op] = x;
    for (const auto& stream : g.streams)
      for (size_t i = 1; i < stream.size(); ++i) CHECK(t[stream[i]].start_us >= t[stream[i - 1]].end_us);
    for (const Op& op : g.ops) {
      CHECK(t[op.id].end_us >= t[op.id].start_us);
      for (OpId d : op.deps) CHECK(t[op.id].start_us >= t[d].end_us);
    }
    // Measured figures in the shared result format.
    CHECK(r.kind == "measured");
    CHECK(r.backend == "cpu");
    CHECK(r.world_size == 1);
    CHECK(r.step_time_s > 0);
    CHECK(r.tokens_per_s > 0);
    CHECK(r.events == static_cast<int64_t>(g.ops.size()));
    // Random data, not zeros: the loss of an untrained model is about ln(vocabulary).
    CHECK(std::abs(out.loss - std::log(static_cast<double>(ir.scenario.model.vocab_size))) < 0.5);
    // Memory: the resident part is exactly the IR's; the transient peak is the IR's replay up to
    // the interleaving of concurrent streams.
    const MemoryBreakdown want = replay_memory(g);
    REQUIRE(out.ranks.size() == 1);
    const MemoryStats& m = out.ranks[0].memory;
    CHECK(m.resident_total() == Approx(want.resident_total()));
    CHECK(m.peak_transient <= 1.5 * want.peak_transient);
    CHECK(m.peak_transient >= 0.5 * want.peak_transient);
    CHECK(r.peak_memory_gib * 1073741824.0 == Approx(m.peak_total()));
  }
}

TEST_CASE("results: summary JSON fields and a trace whose op ids join the IR", "[exec][runtime]") {
  const StepIR ir = one_rank_ir("cpu-tp2", "parallel.tensor=1");
  auto world = make_self_transport();
  const ExecuteOutcome out = execute(ir, *world, ExecuteOptions{});
  const nlohmann::json j = outcome_json(out);
  for (const char* key : {"step_time_s", "tokens_per_s", "model_tflops_per_gpu", "hardware_tflops_per_gpu", "mfu",
                          "bubble_fraction", "peak_memory_gib", "fits_in_memory", "breakdown", "events", "sim_wall_s",
                          "world_size", "ranks", "loss"})
    CHECK(j.contains(key));
  CHECK(j["kind"] == "measured");
  CHECK(j["ranks"][0].contains("rss_peak_gib"));
  CHECK(j["ranks"][0]["resident_gib"].contains("optimizer"));
  const nlohmann::json trace = nlohmann::json::parse(trace_json(out.result, ir));
  const StepResult back = result_from_json(trace["otherData"]["paralab"]);
  CHECK(back.step_time_s == Approx(out.result.step_time_s));
  size_t events = 0;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") {
      const OpId id = e["args"]["op_id"].get<OpId>();
      REQUIRE(id < ir.graph_for(0).ops.size());
      CHECK(e["name"] == ir.graph_for(0).op(id).full_name());
      ++events;
    }
  CHECK(events == ir.graph_for(0).ops.size());
}

TEST_CASE("failures name the rank, the op and the cause", "[exec][runtime]") {
  const StepIR ir = one_rank_ir("cpu-tp2", "parallel.tensor=1");
  auto world = make_self_transport();
  SECTION("an exception in an op") {
    ExecuteOptions o;
    o.fault.action = FaultInjection::Action::throw_error;
    o.fault.rank = 0;
    o.fault.kind = OpKind::layernorm_bwd;
    try {
      execute(ir, *world, o);
      FAIL("no error");
    } catch (const ExecError& e) {
      CHECK(e.rank() == 0);
      std::string first;  // the first layer-norm backward of the graph is the one that fails
      for (const Op& op : ir.graph_for(0).ops)
        if (op.kind == OpKind::layernorm_bwd && first.empty()) first = op.full_name();
      CHECK(std::string(e.what()).find("rank 0: op '" + first + "'") != std::string::npos);
      CHECK(std::string(e.what()).find("injected fault") != std::string::npos);
    }
  }
  SECTION("the watchdog: a stuck op holds up a dependent op on another stream") {
    // The first gradient-norm kernel hangs; the gradient-norm all-reduce on dp_comm waits for it.
    ExecuteOptions o;
    o.watchdog_s = 0.5;
    o.fault.action = FaultInjection::Action::hang;
    o.fault.rank = 0;
    o.fault.kind = OpKind::grad_norm;
    try {
      execute(ir, *world, o);
      FAIL("no error");
    } catch (const WatchdogError& e) {
      const std::string msg = e.what();
      CHECK(msg.find("rank 0") != std::string::npos);
      CHECK(msg.find("watchdog") != std::string::npos);
      CHECK(msg.find("grad_norm") != std::string::npos);
      CHECK(msg.find("waited") != std::string::npos);
    }
  }
  SECTION("a world that does not match the layout") {
    const StepIR ir2 = build_step_ir(scenario("cpu-tp2"));
    CHECK_THROWS_AS(execute(ir2, *world, ExecuteOptions{}), ExecError);
  }
  SECTION("an unknown or unbuilt backend") {
    ExecuteOptions o;
    o.backend = "tpu";
    CHECK_THROWS_WITH(execute(ir, *world, o), Catch::Contains("unknown backend"));
  }
}

TEST_CASE("several steps: state carries over and the last step is measured", "[exec][runtime]") {
  const StepIR ir = one_rank_ir("cpu-tp2", "parallel.tensor=1");
  auto world = make_self_transport();
  ExecuteOptions o;
  o.steps = 3;
  o.verify = true;
  const ExecuteOutcome out = execute(ir, *world, o);
  CHECK_FALSE(out.verify_failed);
  CHECK(out.result.ops.size() == ir.graph_for(0).ops.size());
}

TEST_CASE("warm-up: steps until the time is spent, then the measured ones; every step's time", "[exec][runtime]") {
  const StepIR ir = one_rank_ir("cpu-tp2", "parallel.tensor=1");
  auto world = make_self_transport();
  ExecuteOptions o;
  o.steps = 2;
  SECTION("none by default") {
    const ExecuteOutcome out = execute(ir, *world, o);
    CHECK(out.warmup_steps == 0);
    REQUIRE(out.step_times_s.size() == 2);
    // The measured step is the last one, timed by the same window.
    CHECK(out.step_times_s.back() == Approx(out.result.step_time_s).epsilon(1e-12));
    for (double t : out.step_times_s) CHECK(t > 0);
  }
  SECTION("at least one warm-up step, however short the time") {
    o.warmup_s = 1e-9;
    const ExecuteOutcome out = execute(ir, *world, o);
    CHECK(out.warmup_steps == 1);
    CHECK(out.step_times_s.size() == 3);
  }
  SECTION("warm-up steps cover the time asked for") {
    o.warmup_s = 0.2;
    const ExecuteOutcome out = execute(ir, *world, o);
    REQUIRE(out.warmup_steps >= 1);
    REQUIRE(out.step_times_s.size() == static_cast<size_t>(out.warmup_steps) + 2);
    // The steps' own windows leave out the barriers and clock sync between them, so their sum
    // before the last warm-up step stays under the time asked for.
    double before_last = 0;
    for (int64_t i = 0; i + 1 < out.warmup_steps; ++i) before_last += out.step_times_s[static_cast<size_t>(i)];
    CHECK(before_last < 0.2);
    CHECK(out.step_times_s.back() == Approx(out.result.step_time_s).epsilon(1e-12));
  }
  SECTION("the summary JSON lists them") {
    o.warmup_s = 1e-9;
    const nlohmann::json j = outcome_json(execute(ir, *world, o));
    CHECK(j.at("warmup_steps").get<int64_t>() == 1);
    CHECK(j.at("step_times_s").size() == 3);
  }
}

// Optimizer offload moves state from device to host memory: the cpu backend, whose memory is
// the host's already, refuses it before anything runs (docs/offload.md).
TEST_CASE("the cpu backend refuses optimizer offload with a clear error", "[exec][offload]") {
  Scenario s = scenario("cpu-tp2", {"parallel.tensor=1", "cluster.devices_per_node=1"});
  s.parallel.zero_stage = 1;
  s.training.optimizer_cpu_offload = true;
  const StepIR ir = build_step_ir(s);
  auto world = make_self_transport();
  try {
    execute(ir, *world, ExecuteOptions{});
    FAIL("no error");
  } catch (const ExecError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("optimizer_cpu_offload") != std::string::npos);
    CHECK(msg.find("--backend cuda") != std::string::npos);
  }
}

// nn.DataParallel is simulated only (docs/dataparallel.md): execute says so before anything runs.
TEST_CASE("execute refuses nn.DataParallel, which is simulated only", "[exec][dataparallel]") {
  Scenario s = scenario("cpu-tp2", {"parallel.tensor=1", "cluster.devices_per_node=1"});
  s.parallel.data_parallel_impl = DataParallelImpl::dataparallel;
  const StepIR ir = build_step_ir(s);
  auto world = make_self_transport();
  CHECK_THROWS_WITH(execute(ir, *world, ExecuteOptions{}), Catch::Contains("simulated, not executed"));
}
