// paralab — the simulator's invariants (docs/hardening.md): time never goes backwards, every
// byte sent is received, no link carries more than its bandwidth, every op runs exactly once,
// memory returns to its steady state after the step. Every scenario in scenarios/ and a sweep
// of small layouts run with the checks on (and give bit-identical results with them off); each
// checker is shown to fire on a corrupted input.
#include <catch2/catch.hpp>

#include <array>
#include <string>
#include <vector>

#include "hardening_util.hpp"
#include "ir/error.hpp"
#include "ir/step_ir.hpp"
#include "sim/engine/invariants.hpp"
#include "sim/net/flow_solver.hpp"
#include "sim/net/invariants.hpp"
#include "sim/simulate.hpp"

using namespace paralab;
using namespace paralab::sim;
using paralab::hardening::load_text;
using Catch::Matchers::Contains;

namespace {

sim::Simulation run(const StepIR& ir, bool check) {
  SimulateOptions o;
  o.check_invariants = check;
  return simulate(ir, o);
}

// Checks on must not change a single bit of the result.
void require_identical(const sim::Simulation& a, const sim::Simulation& b) {
  REQUIRE(a.result.ops.size() == b.result.ops.size());
  for (size_t i = 0; i < a.result.ops.size(); ++i) {
    const OpTiming &x = a.result.ops[i], &y = b.result.ops[i];
    REQUIRE((x.rank == y.rank && x.op == y.op && x.start_us == y.start_us && x.end_us == y.end_us));
  }
  REQUIRE(a.result.step_time_s == b.result.step_time_s);
  REQUIRE(a.result.events == b.result.events);
  REQUIRE(a.memory.size() == b.memory.size());
  for (size_t i = 0; i < a.memory.size(); ++i) REQUIRE(a.memory[i].peak_total() == b.memory[i].peak_total());
}

// Simulates with the checks on (must hold) and off (must agree bit for bit).
void check_scenario(const Scenario& s) {
  const StepIR ir = build_step_ir(s);
  sim::Simulation on;
  REQUIRE_NOTHROW(on = run(ir, true));
  const sim::Simulation off = run(ir, false);
  require_identical(on, off);
}

const char* const kTiny =
    "[model]\npreset = \"tiny\"\n[training]\nmicro_batch_size = 1\n"
    "[parallel]\ntensor = 1\npipeline = 1\n[cluster]\ntopology = \"dgx-a100\"\n";

}  // namespace

TEST_CASE("invariants hold on every scenario in scenarios/", "[hardening][invariants]") {
  const auto files = hardening::toml_files(hardening::source_dir() / "scenarios");
  REQUIRE(files.size() >= 2);
  for (const auto& f : files) {
    INFO("scenario " << f.filename().string());
    check_scenario(load_scenario(f));
  }
}

TEST_CASE("invariants hold on a sweep of small layouts", "[hardening][invariants]") {
  // {description, --set overrides}; tiny GPT (8 layers, 4 heads) on DGX A100 nodes of 8.
  const std::vector<std::pair<const char*, std::vector<std::string>>> cases = {
      {"DP8", {"cluster.nodes=1", "training.global_batch_size=8"}},
      {"TP2 SP DP4", {"parallel.tensor=2", "parallel.sequence_parallel=true", "training.global_batch_size=8"}},
      {"TP4 scatter/gather", {"parallel.tensor=4", "training.global_batch_size=4"}},
      {"PP2 1F1B", {"parallel.pipeline=2", "training.global_batch_size=16"}},
      {"PP4 GPipe", {"parallel.pipeline=4", "parallel.schedule=gpipe", "training.global_batch_size=8"}},
      {"PP2 interleaved v2",
       {"parallel.pipeline=2", "parallel.schedule=interleaved", "parallel.virtual_pipeline_stages=2",
        "training.global_batch_size=16"}},
      {"PP4 interleaved v2 TP2",
       {"parallel.pipeline=4", "parallel.tensor=2", "parallel.schedule=interleaved",
        "parallel.virtual_pipeline_stages=2", "training.global_batch_size=4"}},
      {"PP4 uneven 1+3+3+1",
       {"parallel.pipeline=4", "parallel.decoder_first_pipeline_num_layers=1",
        "parallel.decoder_last_pipeline_num_layers=1", "model.num_layers=8", "training.global_batch_size=8"}},
      {"CP2", {"parallel.context=2", "training.global_batch_size=4"}},
      {"CP2 TP2 SP", {"parallel.context=2", "parallel.tensor=2", "parallel.sequence_parallel=true",
                      "training.global_batch_size=4"}},
      {"ZeRO-1", {"parallel.zero_stage=1", "training.global_batch_size=8"}},
      {"ZeRO-2", {"parallel.zero_stage=2", "training.global_batch_size=8"}},
      {"ZeRO-3", {"parallel.zero_stage=3", "training.global_batch_size=8"}},
      {"ZeRO-3 TP2 PP2", {"parallel.zero_stage=3", "parallel.tensor=2", "parallel.pipeline=2",
                          "training.global_batch_size=8"}},
      {"ZeRO-1 no overlap", {"parallel.zero_stage=1", "parallel.overlap_grad_reduce=false",
                             "parallel.overlap_param_gather=false", "training.global_batch_size=8"}},
      {"selective recompute TP2", {"training.recompute=selective", "parallel.tensor=2", "training.global_batch_size=8"}},
      {"full recompute PP2", {"training.recompute=full", "parallel.pipeline=2", "training.global_batch_size=8"}},
      {"fp16 PP2 (found-inf, grad norm across stages)",
       {"training.precision=fp16", "parallel.pipeline=2", "training.global_batch_size=8"}},
      {"fp32 SGD no clipping", {"training.precision=fp32", "training.optimizer=sgd", "training.clip_grad=0",
                                "training.global_batch_size=8"}},
      {"untied PP2", {"model.untie_embeddings=true", "parallel.pipeline=2", "training.global_batch_size=8"}},
      {"unfused attention TP2", {"training.attention=unfused", "parallel.tensor=2", "training.global_batch_size=8"}},
      {"tiny-llama TP2 PP2 (GQA, SwiGLU, RoPE)",
       {"model.preset=tiny-llama", "parallel.tensor=2", "parallel.pipeline=2", "training.global_batch_size=8"}},
      {"2 nodes DP16 (NICs, automatic algorithm)", {"cluster.nodes=2", "training.global_batch_size=16"}},
      {"2 nodes ring", {"cluster.nodes=2", "simulation.collective_algorithm=ring", "training.global_batch_size=16"}},
      {"2 nodes tree", {"cluster.nodes=2", "simulation.collective_algorithm=tree", "training.global_batch_size=16"}},
      {"2 nodes hierarchical",
       {"cluster.nodes=2", "simulation.collective_algorithm=hierarchical", "training.global_batch_size=16"}},
      {"4 nodes TP4 PP2 DP4 ZeRO-2",
       {"cluster.nodes=4", "parallel.tensor=4", "parallel.pipeline=2", "parallel.zero_stage=2",
        "training.global_batch_size=8"}},
      {"TP4 PP4 across 2 nodes", {"cluster.nodes=2", "parallel.tensor=4", "parallel.pipeline=4",
                                       "training.global_batch_size=8"}},
      {"2 nodes with 2 of 8 devices each", {"cluster.nodes=2", "cluster.devices_per_node=2", "training.global_batch_size=4"}},
  };
  for (const auto& [name, sets] : cases) {
    INFO("layout " << name);
    check_scenario(load_text(kTiny, sets));
  }
}

TEST_CASE("invariants hold on the CPU host and on a rail-optimized and a 3-level fabric", "[hardening][invariants]") {
  check_scenario(load_text(kTiny, {"cluster.topology=cpu-host", "cluster.devices_per_node=4", "parallel.tensor=2",
                                   "parallel.pipeline=2", "training.global_batch_size=4"}));
  check_scenario(load_text(kTiny, {"cluster.nodes=4", "topology.network.kind=rail_optimized",
                                   "training.global_batch_size=32"}));
  check_scenario(load_text(kTiny, {"cluster.nodes=8", "topology.network.levels=3", "topology.network.radix=4",
                                   "parallel.tensor=4", "training.global_batch_size=16"}));
  check_scenario(load_text(kTiny, {"cluster.nodes=4", "topology.network.oversubscription=4",
                                   "parallel.zero_stage=3", "training.global_batch_size=32"}));
}

// ---- each check fires on a corrupted input ------------------------------------------------

namespace {

// A tiny IR to corrupt: two stages, so it has pipeline transfers.
StepIR tiny_ir() {
  return build_step_ir(load_text(kTiny, {"parallel.pipeline=2", "training.global_batch_size=8"}));
}

}  // namespace

TEST_CASE("time order: the checkers fire on a timeline that runs backwards", "[hardening][invariants]") {
  CHECK_THROWS_WITH(check_clock(100.0, 99.0, "compute"), Contains("time order"));
  CHECK_NOTHROW(check_clock(100.0, 100.0, "compute"));
  CHECK_NOTHROW(check_clock(100.0, 100.0 - 1e-12, "network"));  // one event within rounding

  const StepIR ir = tiny_ir();
  const StepGraph& g = ir.stages[0];
  const sim::Simulation sim = run(ir, true);
  std::vector<double> start(g.ops.size()), end(g.ops.size());
  for (const OpTiming& t : sim.result.ops)
    if (t.rank == ir.layout.representative(0)) start[t.op] = t.start_us, end[t.op] = t.end_us;
  REQUIRE_NOTHROW(check_causality(g, start, end, 0));
  // An op that starts before its dependency ended.
  OpId victim = kNoOp;
  for (OpId id = 0; id < g.ops.size() && victim == kNoOp; ++id)
    if (!g.ops[id].deps.empty() && end[g.ops[id].deps[0]] > 0) victim = id;
  REQUIRE(victim != kNoOp);
  auto early = start;
  early[victim] = end[g.ops[victim].deps[0]] - 1.0;
  CHECK_THROWS_WITH(check_causality(g, early, end, 0), Contains("time order") && Contains("before its dependency"));
  // An op that ends before it starts.
  auto reversed = end;
  reversed[victim] = start[victim] - 1.0;
  CHECK_THROWS_WITH(check_causality(g, start, reversed, 0), Contains("time order"));
  // Stream order: the second op of the compute stream moved before the first one ended.
  const auto& compute = g.streams[static_cast<size_t>(Stream::compute)];
  REQUIRE(compute.size() >= 2);
  auto jump = start;
  jump[compute[1]] = end[compute[0]] - 1.0;
  CHECK_THROWS_WITH(check_causality(g, jump, end, 0), Contains("stream predecessor"));

  // Through the engine: a corrupted calibration point (a negative duration) cannot make time
  // run backwards; the calibration table drops it and the checked run agrees with a clean one.
  StepIR bad = tiny_ir();
  const Op* gemm = nullptr;
  for (const Op& op : bad.stages[0].ops)
    if (op.gemm()) {
      gemm = &op;
      break;
    }
  REQUIRE(gemm);
  const GemmAttrs& ga = *gemm->gemm();
  bad.scenario.topology.calibration.gemm.push_back(GemmPoint{ga.m, ga.n, ga.k, ga.batch, ga.math, -5.0});
  sim::Simulation checked;
  REQUIRE_NOTHROW(checked = run(bad, true));
  require_identical(checked, sim);
}

TEST_CASE("ops run once: the checker fires on an op run twice or never", "[hardening][invariants]") {
  const StepIR ir = tiny_ir();
  const StepGraph& g = ir.stages[0];
  std::vector<uint32_t> starts(g.ops.size(), 1), finishes(g.ops.size(), 1);
  CHECK_NOTHROW(check_ran_once(g, starts, finishes, 0));
  starts[3] = 2;
  CHECK_THROWS_WITH(check_ran_once(g, starts, finishes, 0), Contains("ops run once") && Contains("started 2 times"));
  starts[3] = 1;
  finishes[5] = 0;
  CHECK_THROWS_WITH(check_ran_once(g, starts, finishes, 0), Contains("ops run once") && Contains("finished 0 times"));
}

TEST_CASE("bytes delivered: the checkers fire on lost bytes and mismatched transfers", "[hardening][invariants]") {
  // A flow that finished with bytes still to move.
  CHECK_NOTHROW(check_flow_drained(1, 1e6, 1e-7, 1e3, 500.0));
  CHECK_THROWS_WITH(check_flow_drained(1, 1e6, 100.0, 1e3, 500.0), Contains("bytes delivered"));
  // Calls or flows left in the network at the end of the step.
  CHECK_NOTHROW(check_network_drained(10, 10, 40, 40, 0));
  CHECK_THROWS_WITH(check_network_drained(10, 9, 40, 39, 1), Contains("bytes delivered"));
  // Something left unmatched.
  CHECK_NOTHROW(check_all_matched({}));
  CHECK_THROWS_WITH(check_all_matched({"pipeline tag 17"}), Contains("unmatched"));

  // Through the engine: a receive that expects other bytes than its send moves.
  StepIR bad = tiny_ir();
  bool changed = false;
  for (Op& op : bad.stages[1].ops)
    if (op.kind == OpKind::recv && !changed) {
      std::get<P2PAttrs>(op.attrs).bytes += 2;
      changed = true;
    }
  REQUIRE(changed);
  CHECK_THROWS_WITH(run(bad, true), Contains("bytes delivered") && Contains("receives"));
  CHECK_NOTHROW(run(bad, false));  // unchecked, the corruption goes unnoticed
}

TEST_CASE("link capacity: the checker fires on a link loaded past its bandwidth", "[hardening][invariants]") {
  const std::vector<double> cap = {100.0, 50.0, 0.0};
  const std::vector<LinkId> links = {0, 1, 2};
  CHECK_NOTHROW(check_link_loads(cap, links, std::vector<double>{100.0, 50.0 * (1 + 1e-12), 0.0}));
  CHECK_THROWS_WITH(check_link_loads(cap, links, std::vector<double>{100.0, 50.1, 0.0}),
                    Contains("link capacity") && Contains("link 1"));
  CHECK_THROWS_WITH(check_link_loads(cap, links, std::vector<double>{100.0, 10.0, 1.0}), Contains("link 2"));

  // The solver's own rates: two flows sharing link 0 (one weighted 3x, e.g. 3 symmetric
  // copies) and a third on links 0 and 1 fill link 0 exactly, never past it.
  FlowSolver solver({1000.0, 400.0});
  REQUIRE(solver.check_invariants() == kCheckInvariantsByDefault);
  solver.set_check_invariants(true);
  const std::vector<LinkLoad> a = {{0, 3.0}}, b = {{0, 1.0}}, c = {{0, 1.0}, {1, 1.0}};
  const uint32_t fa = solver.add(a, 1e6, 1), fb = solver.add(b, 1e6, 2), fc = solver.add(c, 1e6, 3);
  const double load0 = 3 * solver.rate_Bpus(fa) + solver.rate_Bpus(fb) + solver.rate_Bpus(fc);
  CHECK(load0 <= 1000.0 * (1 + 1e-9));
  CHECK(load0 == Approx(1000.0));
  std::vector<FinishedFlow> done;
  while (solver.active_flows() > 0) solver.advance(solver.next_completion_us(), done);
  CHECK(done.size() == 3);
}

TEST_CASE("memory steady state: the checkers fire on a leaked or doubly freed buffer", "[hardening][invariants]") {
  const StepIR ir = tiny_ir();
  const StepGraph& g = ir.stages[0];
  BufferId transient = 0;
  while (g.buffers[transient].resident) ++transient;
  const Op& op = g.ops[0];
  BufferState st = BufferState::unallocated;
  CHECK_NOTHROW(check_buffer_transition(g, transient, st, true, op, 0));
  CHECK_THROWS_WITH(check_buffer_transition(g, transient, st, true, op, 0), Contains("allocates the live"));
  CHECK_NOTHROW(check_buffer_transition(g, transient, st, false, op, 0));
  CHECK_THROWS_WITH(check_buffer_transition(g, transient, st, false, op, 0), Contains("frees the already freed"));
  BufferId resident = 0;
  while (!g.buffers[resident].resident) ++resident;
  BufferState rs = BufferState::unallocated;
  CHECK_THROWS_WITH(check_buffer_transition(g, resident, rs, true, op, 0), Contains("resident"));

  std::vector<BufferState> states(g.buffers.size(), BufferState::freed);
  std::array<double, kMemCategories> live{};
  CHECK_NOTHROW(check_memory_steady(g, states, live, 0));
  live[static_cast<size_t>(MemCategory::activations)] = 4096;
  CHECK_THROWS_WITH(check_memory_steady(g, states, live, 0), Contains("memory steady state") && Contains("activations"));
  live = {};
  states[transient] = BufferState::live;
  CHECK_THROWS_WITH(check_memory_steady(g, states, live, 0), Contains("still allocated"));

  // Through the engine: an IR whose op forgets to free a buffer.
  StepIR bad = tiny_ir();
  bool dropped = false;
  for (Op& o : bad.stages[0].ops)
    if (!o.frees.empty() && !dropped) {
      o.frees.pop_back();
      dropped = true;
    }
  REQUIRE(dropped);
  CHECK_THROWS_WITH(run(bad, true), Contains("memory steady state"));
  CHECK_NOTHROW(run(bad, false));
}
