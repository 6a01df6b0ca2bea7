// paralab — shared cores on a CPU host (sim/engine/core_share.hpp, core_pool.hpp): the pool's
// first-come-first-served grants, and the engine's closed forms when a node's ranks outnumber
// its cores: compute waits for a core and then runs at full speed, a stage's ranks beyond the
// cores take turns, a posted call's polling thread holds a core for its spin window; and a call
// that ends after that window is seen when the sleeping poller wakes.
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
Scenario cpu_node(int64_t tp, int64_t pp, int64_t cores, double spin_us) {
  const int64_t ranks = tp * pp;
  Scenario s = load_inline(small_gpt(), {"cluster.topology=cpu-host", "model.num_layers=12", "parallel.tensor=" + std::to_string(tp), "parallel.pipeline=" + std::to_string(pp),
                                         "cluster.nodes=1", "cluster.devices_per_node=" + std::to_string(ranks),
                                         "topology.node.devices_per_node=" + std::to_string(ranks)});
  free_network(s.topology);
  s.topology.device.kind = DeviceKind::cpu;
  s.topology.device.sm_count = 1;
  s.topology.collectives.intra_sms = s.topology.collectives.inter_sms = s.topology.collectives.p2p_sms = 1;
  s.topology.node.cores = cores;
  s.topology.collectives.poll_spin_us = spin_us;
  return s;
}

int64_t next_shape = 5000;

OpId timed(Scenario& s, GraphBuilder& b, double us) { return timed_op(s, b, next_shape, Stream::compute, us); }

OpId transfer(GraphBuilder& b, bool send, BufferId buf, std::vector<OpId> after = {}) {
  return p2p_op(b, send, 4096, kTagP2PBase, {b.whole(buf)}, std::move(after));
}

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
    const Scenario s = cpu_node(tp, pp, cores, 0);
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
  Scenario s = cpu_node(1, 3, 2, 0);
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
  Scenario s = cpu_node(4, 1, 2, 0);
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

// A posted receive's polling thread holds a core for its spin window. Stage 0 computes 10 ms
// and then sends to stage 1; stage 1 posts the receive at 0 beside a 1 ms op; stage 2 has a
// 10 ms op. Cores: 2. With a 500 us spin: stage 0's op and the spinning receive take the
// cores, stage 1's op runs from 500 us, stage 2's from 1500 us. Without spinning, stage 1's op
// takes the second core at 0 and stage 2's starts at 1 ms.
TEST_CASE("engine: a spinning communication thread holds a core for its window", "[engine][cores][closed-form]") {
  for (const double spin : {500.0, 0.0}) {
    Scenario s = cpu_node(1, 3, 2, spin);
    GraphBuilder b0(0), b1(1), b2(2);
    const BufferId out = b0.buffer("out", 1024, DType::f32, MemCategory::activations, true);
    const BufferId in = b1.buffer("in", 1024, DType::f32, MemCategory::activations, true);
    const OpId a = timed(s, b0, 10'000);
    transfer(b0, true, out, {a});
    const OpId recv = transfer(b1, false, in);
    const OpId b = timed(s, b1, 1'000);
    const OpId c = timed(s, b2, 10'000);
    const StepIR ir = wrap(s, {b0.finish(), b1.finish(), b2.finish()});
    const StepResult r = simulate(ir).result;
    const int64_t r1 = ir.layout.representative(1), r2 = ir.layout.representative(2);
    CAPTURE(spin);
    CHECK(timing_of(r, 0, a)->start_us == 0.0);
    CHECK(timing_of(r, r1, b)->start_us == Approx(spin));
    CHECK(timing_of(r, r2, c)->start_us == Approx(spin + 1'000.0));
    CHECK(duration_of(r, r2, c) == Approx(10'000.0));
    CHECK(timing_of(r, r1, recv)->end_us >= 10'000.0);  // the send came after stage 0's op
  }
}

// A call that ends more than poll_spin_us after its rank posted it is seen wake_us later
// (CollectiveSpec::wake_us), and a send p2p_ack_us after its receive (and wake_us later still when
// the send is the one that waited). Stage 0 sends after a
// 10 ms op while stage 1's receive was posted at 0 (it waited 10 ms: asleep), or stage 1 posts
// its receive after the 10 ms op while the send waits (the receive spins: seen at once). The
// node has a core per rank, so only the wake moves the ends. Reference: the same step with no
// wake time (or no spin window, which turns the wake off).
TEST_CASE("engine: a call ending after its poller stopped spinning is seen wake_us later", "[engine][cores][closed-form]") {
  constexpr double kWake = 300.0, kAck = 100.0;
  for (const bool receiver_waits : {true, false}) {
    auto run = [&](double spin, double wake) {
      Scenario s = cpu_node(1, 2, 2, spin);
      s.topology.collectives.wake_us = wake;
      s.topology.collectives.p2p_ack_us = kAck;
      GraphBuilder b0(0), b1(1);
      const BufferId out = b0.buffer("out", 1024, DType::f32, MemCategory::activations, true);
      const BufferId in = b1.buffer("in", 1024, DType::f32, MemCategory::activations, true);
      const OpId a = receiver_waits ? timed(s, b0, 10'000) : timed(s, b1, 10'000);
      const OpId send = transfer(b0, true, out, receiver_waits ? std::vector<OpId>{a} : std::vector<OpId>{});
      const OpId recv = transfer(b1, false, in, receiver_waits ? std::vector<OpId>{} : std::vector<OpId>{a});
      const StepIR ir = wrap(s, {b0.finish(), b1.finish()});
      const StepResult r = simulate(ir).result;
      const int64_t r1 = ir.layout.representative(1);
      return std::pair{timing_of(r, 0, send)->end_us, timing_of(r, r1, recv)->end_us};
    };
    CAPTURE(receiver_waits);
    const auto [send0, recv0] = run(500.0, 0.0);
    CHECK(send0 - recv0 == Approx(kAck));
    CHECK(recv0 > 10'000.0);
    const auto [send1, recv1] = run(500.0, kWake);
    CHECK(recv1 - recv0 == Approx(receiver_waits ? kWake : 0.0));
    CHECK(send1 - recv1 == Approx(receiver_waits ? kAck : kAck + kWake));  // a sleeping sender sees it late
    const auto [send2, recv2] = run(0.0, kWake);  // no spin window: nothing sleeps
    CHECK(recv2 == Approx(recv0));
    CHECK(send2 == Approx(send0));
  }
}

// A collective within the stage: the representative arrives last, after waiting sync_skew_us
// for its members, and its spin window counts from its own post (the executed call's last
// member waits 0). A call shorter than the window is not moved by the skew before it; one
// longer than the window is seen wake_us late.
TEST_CASE("engine: a call's spin window counts from the representative's own post", "[engine][cores][closed-form]") {
  constexpr double kSkew = 100.0, kWake = 300.0;
  auto duration = [&](double spin, double wake) {
    Scenario s = cpu_node(2, 1, 2, spin);
    s.topology.collectives.sync_skew_us = kSkew;
    s.topology.collectives.wake_us = wake;
    GraphBuilder b(0);
    const BufferId x = b.buffer("x", 1024, DType::f32, MemCategory::activations, true);
    const OpId a = timed(s, b, 1'000);
    const OpId c = collective_op(b, paralab::CollKind::all_reduce, GroupKind::tp, 4096, 7, {b.whole(x)}, Stream::tp_comm, {a});
    const StepResult r = simulate(wrap(s, {b.finish()})).result;
    CHECK(timing_of(r, 0, c)->start_us >= 1'000.0 + kSkew);
    return duration_of(r, 0, c);
  };
  const double call_us = duration(1e5, 0.0);
  REQUIRE(call_us > 0.0);
  CHECK(duration(call_us + kSkew / 2, kWake) == Approx(call_us));
  CHECK(duration(call_us + 2 * kSkew, kWake) == Approx(call_us));
  CHECK(duration(call_us / 2, kWake) == Approx(call_us + kWake));
  CHECK(duration(call_us / 2, 0.0) == Approx(call_us));
}

// A spinning poller gives its core to a compute op that waits for one poll_yield_us after it
// took it (CollectiveSpec::poll_yield_us; the executor's poller hands its turn over every 32
// tests). The step above: stage 1's op starts when the receive's poller yields, stage 2's after
// it; a yield at or beyond the window is the window.
TEST_CASE("engine: a spinning poller gives its core to waiting compute after poll_yield_us", "[engine][cores][closed-form]") {
  for (const double yield : {0.0, 200.0, 500.0, 800.0}) {
    Scenario s = cpu_node(1, 3, 2, 500.0);
    s.topology.collectives.poll_yield_us = yield;
    GraphBuilder b0(0), b1(1), b2(2);
    const BufferId out = b0.buffer("out", 1024, DType::f32, MemCategory::activations, true);
    const BufferId in = b1.buffer("in", 1024, DType::f32, MemCategory::activations, true);
    const OpId a = timed(s, b0, 10'000);
    transfer(b0, true, out, {a});
    transfer(b1, false, in);
    const OpId b = timed(s, b1, 1'000);
    const OpId c = timed(s, b2, 10'000);
    const StepIR ir = wrap(s, {b0.finish(), b1.finish(), b2.finish()});
    const StepResult r = simulate(ir).result;
    const int64_t r1 = ir.layout.representative(1), r2 = ir.layout.representative(2);
    const double at = std::min(yield, 500.0);
    CAPTURE(yield);
    CHECK(timing_of(r, 0, a)->start_us == 0.0);
    CHECK(timing_of(r, r1, b)->start_us == Approx(at));
    CHECK(timing_of(r, r2, c)->start_us == Approx(at + 1'000.0));
  }
}

// The dispatch gap by the node's computing ranks (Calibration::dispatch), three stages on two
// cores: stage 0 runs x then y (1 ms each, y after x on the compute stream); stage 1 runs one op
// of 5 ms or of 0.5 ms; stage 2 nothing. At x's end stage 1 still computes (2 ranks: y starts
// 50 us later) or has ended (1 rank: 10 us). Points {1: 10, 3: 90} put 2 ranks on the lower of
// the two nearest (10 us); without points dispatch_us (7 us) holds whoever computes.
TEST_CASE("engine: the dispatch gap follows the node's computing ranks", "[engine][cores][closed-form]") {
  auto y_start = [](double z_us, std::vector<DispatchPoint> pts) {
    Scenario s = cpu_node(1, 3, 2, 0);
    s.topology.device.dispatch_us = 7.0;
    s.topology.calibration.dispatch = std::move(pts);
    GraphBuilder b0(0), b1(1), b2(2);
    timed(s, b0, 1'000);
    const OpId y = timed(s, b0, 1'000);
    timed(s, b1, z_us);
    const StepIR ir = wrap(s, {b0.finish(), b1.finish(), b2.finish()});
    return timing_of(simulate(ir).result, 0, y)->start_us;
  };
  const std::vector<DispatchPoint> table = {{1, 10.0}, {2, 50.0}, {3, 90.0}};
  CHECK(y_start(5'000, table) == Approx(1'050.0));
  CHECK(y_start(500, table) == Approx(1'010.0));
  CHECK(y_start(5'000, {{1, 10.0}, {3, 90.0}}) == Approx(1'010.0));
  CHECK(y_start(5'000, {{3, 90.0}}) == Approx(1'090.0));
  CHECK(y_start(5'000, {}) == Approx(1'007.0));
  CHECK(y_start(500, {}) == Approx(1'007.0));
}

// A collective within its stage that starts while a call of another group kind or stage on its
// node was posted less than poll_spin_us before and has not ended pays contended_lat_us at its
// end (CollectiveSpec::contended_lat_us). Stage 1 posts a receive at 0 that waits for stage 0's
// send after a 2 ms op, and its TP all-reduce after an op of `lead` us: at 100 us the receive
// was posted 100 us before (its poller spins: contended), at 600 us 600 us before (asleep: not).
// A call posted at the same instant counts too, whichever the engine takes first. Reference:
// the same step without the extra.
TEST_CASE("engine: a collective beside another group's spinning poller pays contended_lat_us", "[engine][cores][closed-form]") {
  constexpr double kExtra = 200.0;
  // point_us >= 0: a [[calibration.call]] point for the TP forward all-reduces.
  auto duration = [&](double lead_us, double extra, double point_us) {
    Scenario s = cpu_node(2, 2, 4, 500.0);
    s.topology.collectives.contended_lat_us = extra;
    if (point_us >= 0) s.topology.calibration.calls = {{paralab::CollKind::all_reduce, GroupKind::tp, Phase::forward, point_us}};
    GraphBuilder b0(0), b1(1);
    const BufferId out = b0.buffer("out", 1024, DType::f32, MemCategory::activations, true);
    const BufferId in = b1.buffer("in", 1024, DType::f32, MemCategory::activations, true);
    const BufferId x = b1.buffer("x", 1024, DType::f32, MemCategory::activations, true);
    const OpId a = timed(s, b0, 2'000);
    transfer(b0, true, out, {a});
    transfer(b1, false, in);
    std::vector<OpId> after;
    if (lead_us > 0) after.push_back(timed(s, b1, lead_us));
    const OpId c = collective_op(b1, paralab::CollKind::all_reduce, GroupKind::tp, 4096, 7, {b1.whole(x)}, Stream::tp_comm, after);
    const StepIR ir = wrap(s, {b0.finish(), b1.finish()});
    const StepResult r = simulate(ir).result;
    return duration_of(r, ir.layout.representative(1), c);
  };
  for (double lead : {0.0, 100.0, 600.0}) {
    CAPTURE(lead);
    const double base = duration(lead, 0.0, -1);
    CHECK(duration(lead, kExtra, -1) == Approx(base + (lead < 500.0 ? kExtra : 0.0)));
    // With a calibrated point for the all-reduce (Calibration::calls) a contended call still
    // costs launch_lat_us + contended_lat_us in all (what the calibration fitted over the
    // contended calls), or its point where that is more; an uncontended one its point.
    for (const double own : {50.0, 300.0}) {
      CAPTURE(own);
      const double launch = cpu_node(2, 2, 4, 500.0).topology.collectives.launch_lat_us;
      const double with_point = duration(lead, kExtra, launch + own);
      CHECK(with_point == Approx(base + (lead < 500.0 ? std::max(own, kExtra) : own)));
    }
  }
}
