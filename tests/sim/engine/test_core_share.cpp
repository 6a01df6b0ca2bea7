// paralab — shared cores on a CPU host (sim/engine/core_share.hpp, core_pool.hpp): the pool's
// first-come-first-served grants, and the engine's closed forms when a node's ranks outnumber
// its cores: compute waits for a core and then runs at full speed, and a stage's ranks beyond
// the cores take turns.
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "engine_test_util.hpp"
#include "ir/error.hpp"
#include "sim/engine/core_pool.hpp"
#include "sim/engine/core_share.hpp"

using namespace paralab;
using namespace paralab::sim;
using namespace paralab::sim::test;

namespace {

// One node of `ranks` CPU ranks (pipeline stages, or tensor-parallel ranks of one stage) with
// `cores` cores; every GEMM of the hand-built graphs gets an exact duration.
Scenario cpu_node(int64_t tp, int64_t pp, int64_t cores) {
  const int64_t ranks = tp * pp;
  Scenario s = load_inline(small_gpt(), {"cluster.topology=cpu-host", "model.num_layers=12", "parallel.tensor=" + std::to_string(tp), "parallel.pipeline=" + std::to_string(pp),
                                         "cluster.nodes=1", "cluster.devices_per_node=" + std::to_string(ranks),
                                         "topology.node.devices_per_node=" + std::to_string(ranks)});
  free_network(s.topology);
  s.topology.device.kind = DeviceKind::cpu;
  s.topology.device.sm_count = 1;
  s.topology.collectives.intra_sms = s.topology.collectives.inter_sms = s.topology.collectives.p2p_sms = 1;
  s.topology.node.cores = cores;
  return s;
}

int64_t next_shape = 5000;

OpId timed(Scenario& s, GraphBuilder& b, double us) { return timed_op(s, b, next_shape, Stream::compute, us); }

}  // namespace

TEST_CASE("core pool: first come, first served; a claim waits behind earlier ones", "[engine][cores]") {
  CorePool p(1, 2);
  std::vector<CorePool::Claim> got;
  CHECK(p.acquire(0, {0, 1, 1}));
  CHECK_FALSE(p.acquire(0, {0, 2, 2}));  // needs both cores
  CHECK_FALSE(p.acquire(0, {0, 3, 1}));  // one core is free, but claim 2 came first
  CHECK(p.free_cores(0) == 1);
  p.release(0, 1, got);
  REQUIRE(got.size() == 1);
  CHECK(got[0].op == 2);
  CHECK(p.free_cores(0) == 0);
  got.clear();
  p.release(0, 2, got);
  REQUIRE(got.size() == 1);
  CHECK(got[0].op == 3);
  got.clear();
  p.release(0, 1, got);
  CHECK(got.empty());
  CHECK(p.idle());
  CHECK_THROWS_AS(p.release(0, 1, got), InternalError);     // more back than taken
  CHECK_THROWS_AS(p.acquire(0, {0, 4, 3}), InternalError);  // more than the node has
  CHECK_THROWS_AS(CorePool(1, 0), InternalError);
}

TEST_CASE("core share: the regime follows ranks per node against the node's cores", "[engine][cores]") {
  auto mode = [](int64_t tp, int64_t pp, int64_t cores) {
    const Scenario s = cpu_node(tp, pp, cores);
    return CoreShare(wrap(s, std::vector<StepGraph>(static_cast<size_t>(pp), GraphBuilder(0).finish()))).mode();
  };
  CHECK(mode(1, 4, 2) == CoreShare::Mode::node_cores);  // 4 ranks, 2 cores: not bound
  CHECK(mode(1, 2, 2) == CoreShare::Mode::rank_cores);  // 2 ranks, 2 cores: one each
  CHECK(mode(1, 4, 0) == CoreShare::Mode::rank_cores);  // cores not given: each rank owns its own
  Scenario gpu = load_inline(small_gpt());
  gpu.topology.collectives.intra_sms = 0;
  gpu.topology.collectives.inter_sms = 0;
  gpu.topology.collectives.p2p_sms = 0;
  CHECK(CoreShare(wrap(gpu, {GraphBuilder(0).finish()})).mode() == CoreShare::Mode::none);
}

// Three stages on two cores, one 10 ms op each, all ready at 0: stages 0 and 1 take the cores,
// stage 2 waits for the first to end and then runs its full 10 ms. With three cores, every op
// runs at once.
TEST_CASE("engine: ranks beyond a node's cores wait for one, then run at full speed", "[engine][cores][closed-form]") {
  Scenario s = cpu_node(1, 3, 2);
  std::vector<GraphBuilder> b;
  std::vector<OpId> op;
  for (int64_t st = 0; st < 3; ++st) {
    b.emplace_back(st);
    op.push_back(timed(s, b.back(), 10'000));
  }
  const StepIR ir = wrap(s, {b[0].finish(), b[1].finish(), b[2].finish()});
  const StepResult r = simulate(ir).result;
  const int64_t r1 = ir.layout.representative(1), r2 = ir.layout.representative(2);
  CHECK(timing_of(r, 0, op[0])->start_us == 0.0);
  CHECK(timing_of(r, r1, op[1])->start_us == 0.0);
  CHECK(timing_of(r, r2, op[2])->start_us == Approx(10'000.0));
  CHECK(duration_of(r, r2, op[2]) == Approx(10'000.0));
  CHECK(r.step_time_s == Approx(0.020));

  Scenario three = s;
  three.topology.node.cores = 3;  // 3 ranks, 3 cores: bound, each its own
  const StepResult r3 = simulate(wrap(three, ir.stages)).result;
  CHECK(timing_of(r3, r2, op[2])->start_us == 0.0);
  CHECK(r3.step_time_s == Approx(0.010));
}

// Four tensor-parallel ranks of one stage on two cores: they take turns, two at a time. The
// representative's 10 ms op holds the cores for 20 ms and is measured as its own 10 ms (its
// turn is the second).
TEST_CASE("engine: a stage's ranks beyond the node's cores take turns", "[engine][cores][closed-form]") {
  Scenario s = cpu_node(4, 1, 2);
  GraphBuilder b(0);
  const OpId a = timed(s, b, 10'000);
  const OpId c = timed(s, b, 5'000);
  const StepIR ir = wrap(s, {b.finish()});
  const StepResult r = simulate(ir).result;
  CHECK(timing_of(r, 0, a)->start_us == Approx(10'000.0));
  CHECK(timing_of(r, 0, a)->end_us == Approx(20'000.0));
  CHECK(timing_of(r, 0, c)->start_us == Approx(25'000.0));
  CHECK(timing_of(r, 0, c)->end_us == Approx(30'000.0));
}
