// paralab — per-class call costs (Calibration::calls, ir/topology.hpp's CallPoint): a
// collective whose kind, group and phase have a calibrated point pays that fixed cost in place
// of CollectiveSpec::launch_lat_us; every other call keeps the spec's. Closed forms on
// hand-built graphs, against the same step without the points.
#include <catch2/catch.hpp>

#include <string>

#include "engine_test_util.hpp"

using namespace paralab;
using namespace paralab::sim;
using namespace paralab::sim::test;

namespace {

int64_t next_shape = 7000;

// Two tensor-parallel ranks, one per node, a free network: a call's time is its fixed cost
// plus its bytes over the links.
Scenario two_ranks() {
  Scenario s = load_inline(small_gpt(), {"parallel.tensor=2", "cluster.nodes=2", "cluster.devices_per_node=1",
                                         "topology.node.devices_per_node=1"});
  free_network(s.topology);
  s.topology.collectives.launch_lat_us = 12.0;
  return s;
}

struct Calls {
  OpId fwd_ar, bwd_ar, fwd_ag;
  StepIR ir;
};

// compute 1 ms -> fwd all-reduce -> compute -> bwd all-reduce -> compute -> fwd all-gather.
Calls step(Scenario s) {
  GraphBuilder b(0);
  const BufferId x = b.buffer("x", 4096, DType::f32, MemCategory::activations, true);
  const BufferId y = b.buffer("y", 4096, DType::f32, MemCategory::activations, true);
  const BufferId z = b.buffer("z", 4096, DType::f32, MemCategory::activations, true);
  const OpId a = timed_op(s, b, next_shape, Stream::compute, 1'000, {}, {b.whole(x)});
  const OpId fwd_ar = collective_op(b, paralab::CollKind::all_reduce, GroupKind::tp, 16384, 1, {b.whole(x)}, Stream::tp_comm, {a});
  const OpId c = timed_op(s, b, next_shape, Stream::compute, 1'000, {b.whole(x)}, {b.whole(y)});
  b.labels.phase = Phase::backward;
  const OpId bwd_ar = collective_op(b, paralab::CollKind::all_reduce, GroupKind::tp, 16384, 2, {b.whole(y)}, Stream::tp_comm, {c});
  b.labels.phase = Phase::forward;
  const OpId e = timed_op(s, b, next_shape, Stream::compute, 1'000, {b.whole(y)}, {b.whole(z)});
  const OpId fwd_ag = collective_op(b, paralab::CollKind::all_gather, GroupKind::tp, 16384, 3, {b.whole(z)}, Stream::tp_comm, {e});
  StepIR ir = wrap(s, {b.finish()});
  return {fwd_ar, bwd_ar, fwd_ag, std::move(ir)};
}

}  // namespace

TEST_CASE("engine: a collective with a calibrated point of its kind, group and phase pays that fixed cost", "[engine][closed-form]") {
  const Calls plain = step(two_ranks());
  const StepResult r0 = simulate(plain.ir).result;
  const int64_t rank = plain.ir.layout.representative(0);
  REQUIRE(duration_of(r0, rank, plain.fwd_ar) > 12.0);

  // The backward all-reduces cost 100 us, the forward all-gathers 3 us: the forward
  // all-reduce (no point) keeps launch_lat_us; a point of another group changes nothing.
  Scenario s = two_ranks();
  s.topology.calibration.calls = {{paralab::CollKind::all_reduce, GroupKind::tp, Phase::backward, 100.0},
                                  {paralab::CollKind::all_gather, GroupKind::tp, Phase::forward, 3.0},
                                  {paralab::CollKind::all_reduce, GroupKind::dp, Phase::forward, 500.0}};
  const Calls pointed = step(s);
  const StepResult r = simulate(pointed.ir).result;
  CHECK(duration_of(r, rank, pointed.fwd_ar) == Approx(duration_of(r0, rank, plain.fwd_ar)));
  CHECK(duration_of(r, rank, pointed.bwd_ar) == Approx(duration_of(r0, rank, plain.bwd_ar) + 100.0 - 12.0));
  CHECK(duration_of(r, rank, pointed.fwd_ag) == Approx(duration_of(r0, rank, plain.fwd_ag) + 3.0 - 12.0));
  // The step moves by the calls' difference (they are on its critical path).
  CHECK(r.step_time_s * 1e6 == Approx(r0.step_time_s * 1e6 + 88.0 - 9.0));
}

// Beside compute (CallPoint::beside_lat_us): a call during which its rank's compute stream ran
// an op pays its class's cost for that; the same class's call whose rank waited for it pays
// launch_lat_us. compute 1 ms -> bwd all-gather "beside" (the next compute op does not need it)
// -> compute -> compute (needs it) -> bwd all-gather "alone" -> compute (needs it).
TEST_CASE("engine: a collective its rank computes beside pays its class's cost beside compute", "[engine][closed-form]") {
  struct Beside {
    OpId beside, alone;
    StepIR ir;
  };
  auto build = [](Scenario s) {
    GraphBuilder b(0);
    const BufferId x = b.buffer("x", 4096, DType::f32, MemCategory::activations, true);
    const BufferId y = b.buffer("y", 4096, DType::f32, MemCategory::activations, true);
    const BufferId z = b.buffer("z", 4096, DType::f32, MemCategory::activations, true);
    const BufferId w = b.buffer("w", 4096, DType::f32, MemCategory::activations, true);
    b.labels.phase = Phase::backward;
    const OpId a = timed_op(s, b, next_shape, Stream::compute, 1'000, {}, {b.whole(x)});
    const OpId beside = collective_op(b, paralab::CollKind::all_gather, GroupKind::tp, 16384, 1, {b.whole(x)}, Stream::tp_comm, {a});
    timed_op(s, b, next_shape, Stream::compute, 1'000, {}, {b.whole(y)});
    const OpId e = timed_op(s, b, next_shape, Stream::compute, 1'000, {b.whole(x), b.whole(y)}, {b.whole(z)}, {beside});
    const OpId alone = collective_op(b, paralab::CollKind::all_gather, GroupKind::tp, 16384, 2, {b.whole(z)}, Stream::tp_comm, {e});
    timed_op(s, b, next_shape, Stream::compute, 1'000, {b.whole(z)}, {b.whole(w)}, {alone});
    StepIR ir = wrap(s, {b.finish()});
    return Beside{beside, alone, std::move(ir)};
  };
  const Beside plain = build(two_ranks());
  const StepResult r0 = simulate(plain.ir).result;
  const int64_t rank = plain.ir.layout.representative(0);
  const double beside0 = duration_of(r0, rank, plain.beside), alone0 = duration_of(r0, rank, plain.alone);

  Scenario s = two_ranks();
  CallPoint p;
  p.collective = paralab::CollKind::all_gather;
  p.group = GroupKind::tp;
  p.phase = Phase::backward;
  p.launch_lat_us = 20.0;
  p.beside_lat_us = 150.0;
  s.topology.calibration.calls = {p};
  const Beside pointed = build(s);
  const StepResult r = simulate(pointed.ir).result;
  CHECK(duration_of(r, rank, pointed.beside) == Approx(beside0 + 150.0 - 12.0));
  CHECK(duration_of(r, rank, pointed.alone) == Approx(alone0 + 20.0 - 12.0));
  // The lone call is on the critical path; the call beside compute is not (the compute op
  // beside it takes 1 ms), which it slows only by the SMs it holds for longer.
  CHECK(r.step_time_s * 1e6 >= r0.step_time_s * 1e6 + 8.0 - 1e-6);
  CHECK(r.step_time_s * 1e6 < r0.step_time_s * 1e6 + 8.0 + 0.1 * (150.0 - 12.0));

  // Without a cost beside compute, both pay the class's.
  Scenario q = two_ranks();
  p.beside_lat_us = 0.0;
  q.topology.calibration.calls = {p};
  const Beside one = build(q);
  const StepResult r1 = simulate(one.ir).result;
  CHECK(duration_of(r1, rank, one.beside) == Approx(beside0 + 8.0));
  CHECK(duration_of(r1, rank, one.alone) == Approx(alone0 + 8.0));
}
