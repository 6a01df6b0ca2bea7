// paralab — the event engine on hand-built graphs: CUDA stream semantics, cross-stream and
// cross-stage dependencies, pipeline transfers, the DDP overlap example, memory over time,
// out-of-memory reporting and deadlock detection.
#include <catch2/catch.hpp>

#include <string>

#include "engine_test_util.hpp"
#include "ir/error.hpp"

using namespace paralab;
using namespace paralab::sim;
using namespace paralab::sim::test;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Hand-built graphs with exact op durations: every GEMM gets a unique shape and a calibration
// point with the duration wanted (calibration points override the model exactly).
struct Hand {
  Scenario& s;
  GraphBuilder b;
  static inline int64_t next_shape = 1000;

  Hand(Scenario& sc, int64_t stage) : s(sc), b(stage) {}

  OpId timed(Stream stream, double us, std::vector<TensorRef> reads = {}, std::vector<TensorRef> writes = {},
             std::vector<OpId> after = {}) {
    return timed_op(s, b, next_shape, stream, us, std::move(reads), std::move(writes), std::move(after));
  }
  OpId collective(paralab::CollKind kind, GroupKind group, int64_t bytes, uint32_t tag, std::vector<TensorRef> rw,
                  Stream stream, std::vector<OpId> after = {}) {
    return collective_op(b, kind, group, bytes, tag, std::move(rw), stream, std::move(after));
  }
  OpId p2p(bool send, int64_t bytes, uint32_t tag, std::vector<TensorRef> rw, std::vector<OpId> after = {}) {
    return p2p_op(b, send, bytes, tag, std::move(rw), std::move(after));
  }
};

// One rank per node, `nodes` nodes, the layout given.
Scenario cluster(int64_t tp, int64_t pp, int64_t dp, bool free_net = true) {
  Scenario s = load_inline(small_gpt(),
                           {"parallel.tensor=" + std::to_string(tp), "parallel.pipeline=" + std::to_string(pp),
                            "parallel.data=" + std::to_string(dp), "cluster.nodes=" + std::to_string(tp * pp * dp),
                            "cluster.devices_per_node=1", "topology.node.devices_per_node=1",
                            "training.global_batch_size=" + std::to_string(8 * dp)});
  if (free_net) free_network(s.topology);
  return s;
}

}  // namespace

TEST_CASE("engine: ops of one stream run in order; other streams run concurrently", "[engine]") {
  Scenario s = cluster(1, 1, 1);
  Hand h(s, 0);
  const OpId a = h.timed(Stream::compute, 10'000);
  const OpId b = h.timed(Stream::compute, 20'000);
  const OpId c = h.timed(Stream::tp_comm, 5'000);       // no dependency: starts at 0 beside a
  const OpId d = h.timed(Stream::tp_comm, 5'000, {}, {}, {b});  // waits for b on the other stream
  const StepIR ir = wrap(s, {h.b.finish()});
  const StepResult r = simulate(ir).result;
  CHECK(timing_of(r, 0, a)->start_us == 0.0);
  CHECK(timing_of(r, 0, b)->start_us == 10'000.0);
  CHECK(timing_of(r, 0, c)->start_us == 0.0);
  CHECK(timing_of(r, 0, c)->end_us == 5'000.0);
  CHECK(timing_of(r, 0, d)->start_us == 30'000.0);
  CHECK(r.step_time_s == Approx(0.035));
  // Compute-stream busy 30 ms; the other stream counts as communication: 5 ms exposed (d).
  CHECK(r.breakdown.compute_s == Approx(0.030));
}

// A 2-rank host whose corrections say 3 us between two ops of a stream, 7 us to hand off to a
// communication stream, 2 us back to the compute stream, and tensor-parallel all-reduces 20 us
// plus 1.5 x their modeled time (ir/correction.hpp; sim/engine/overhead.hpp).
namespace {
Scenario host_with_corrections() {
  Scenario s = cluster(2, 1, 1);
  OpClass all_reduce{CostKind::time, OpFamily::comm, OpKind::collective, paralab::CollKind::all_reduce};
  s.topology.calibration.corrections = CorrectionTable({
      CorrectionRow{OpClass{CostKind::dispatch}, Correction{3.0, 1.0}},
      CorrectionRow{OpClass{CostKind::handoff, OpFamily::comm}, Correction{7.0, 1.0}},
      CorrectionRow{OpClass{CostKind::handoff, OpFamily::compute}, Correction{2.0, 1.0}},
      CorrectionRow{all_reduce, Correction{20.0, 1.5}},
      CorrectionRow{OpClass{CostKind::time, OpFamily::compute, OpKind::gemm}, Correction{0.0, 1.1}},
  });
  return s;
}
}  // namespace

// The engine asks the table once per op (docs/simulator.md, "Corrections"): an op released by
// its stream predecessor starts its dispatch gap after it, one released by a dependency on
// another stream its family's hand-off after that; a compute op takes fixed + factor x its
// modeled time, a call ends fixed + factor x its network time after it starts.
TEST_CASE("engine: measured dispatch, hand-off and time corrections", "[engine][closed-form]") {
  Scenario s = host_with_corrections();
  Hand h(s, 0);
  const BufferId x = h.b.buffer("x", 4096, DType::f32, MemCategory::activations, true);
  const OpId a = h.timed(Stream::compute, 10'000);
  const OpId b = h.timed(Stream::compute, 20'000);
  // c and d are GEMMs on a communication stream: a class is the op's kind, not its stream.
  const OpId c = h.timed(Stream::dp_comm, 5'000);               // starts at 0 beside a
  const OpId d = h.timed(Stream::dp_comm, 5'000, {}, {}, {b});  // c ended long before b: a (compute) hand-off
  const OpId e = h.collective(paralab::CollKind::all_reduce, GroupKind::tp, 4096, 7, {h.b.whole(x)}, Stream::tp_comm, {b});
  const OpId f = h.timed(Stream::compute, 1'000, {}, {}, {e});  // released by e on another stream
  const StepIR ir = wrap(s, {h.b.finish()});
  const StepResult r = simulate(ir).result;
  Scenario z = s;
  z.topology.calibration.corrections = CorrectionTable();
  const StepResult r0 = simulate(wrap(z, {ir.stages[0]})).result;
  const double e_modeled = timing_of(r0, 0, e)->end_us - timing_of(r0, 0, e)->start_us;
  CHECK(timing_of(r, 0, a)->start_us == 0.0);
  CHECK(timing_of(r, 0, a)->end_us == Approx(11'000.0));  // a GEMM: factor 1.1
  CHECK(timing_of(r, 0, b)->start_us == Approx(11'003.0));
  CHECK(timing_of(r, 0, c)->start_us == 0.0);
  CHECK(timing_of(r, 0, c)->end_us == Approx(5'500.0));
  CHECK(timing_of(r, 0, d)->start_us == Approx(33'003.0 + 2.0));
  CHECK(timing_of(r, 0, e)->start_us == Approx(33'003.0 + 7.0));
  CHECK(timing_of(r, 0, e)->end_us - timing_of(r, 0, e)->start_us == Approx(20.0 + 1.5 * e_modeled));
  CHECK(timing_of(r, 0, f)->start_us == Approx(timing_of(r, 0, e)->end_us + 2.0));
  CHECK(timing_of(r, 0, f)->end_us - timing_of(r, 0, f)->start_us == Approx(1'100.0));

  // Without a table (every uncorrected topology): ops start when their constraints end.
  CHECK(timing_of(r0, 0, b)->start_us == 10'000.0);
  CHECK(timing_of(r0, 0, e)->start_us == 30'000.0);
  CHECK(timing_of(r0, 0, f)->start_us == timing_of(r0, 0, e)->end_us);
  // The gaps with nothing in flight are host time in the breakdown, not bubble (no pipeline):
  // a to b, b to d (e to f lies in d's time on its stream: exposed).
  CHECK(r.breakdown.bubble_s == 0.0);
  CHECK(r.breakdown.host_s == Approx((3 + 2) * 1e-6));
}

// A CPU rank that owns its core: a communication thread moving data is one more runnable
// thread, and the scheduler shares the core fairly, so a 10 ms compute op beside a collective in
// flight over [c0, c1] runs at half speed meanwhile and ends at 10 ms + (c1 - c0) / 2; with two
// cores it keeps 2/3 of them: 10 ms + (c1 - c0) / 3.
TEST_CASE("engine: on a CPU host a communication thread shares the rank's cores with compute", "[engine][closed-form]") {
  Scenario s = cluster(2, 1, 1, false);
  s.topology.device.kind = DeviceKind::cpu;
  s.topology.device.sm_count = 1;
  s.topology.collectives.intra_sms = s.topology.collectives.inter_sms = s.topology.collectives.p2p_sms = 1;
  Hand h(s, 0);
  const BufferId x = h.b.buffer("x", int64_t{1} << 22, DType::f32, MemCategory::activations, true);
  const OpId c = h.collective(paralab::CollKind::all_reduce, GroupKind::tp, int64_t{1} << 24, 9, {h.b.whole(x)}, Stream::tp_comm);
  const OpId a = h.timed(Stream::compute, 10'000);
  const StepIR ir = wrap(s, {h.b.finish()});
  const StepResult r = simulate(ir).result;
  const double c0 = timing_of(r, 0, c)->start_us, c1 = timing_of(r, 0, c)->end_us;
  REQUIRE(c1 - c0 > 100.0);
  REQUIRE(c1 < 10'000.0);
  CHECK(timing_of(r, 0, a)->start_us == 0.0);
  CHECK(timing_of(r, 0, a)->end_us == Approx(10'000.0 + (c1 - c0) / 2).epsilon(1e-9));
  Scenario two = s;
  two.topology.device.sm_count = 2;
  const StepResult r2 = simulate(wrap(two, {ir.stages[0]})).result;
  const double d0 = timing_of(r2, 0, c)->start_us, d1 = timing_of(r2, 0, c)->end_us;
  CHECK(timing_of(r2, 0, a)->start_us == 0.0);
  CHECK(timing_of(r2, 0, a)->end_us == Approx(10'000.0 + (d1 - d0) / 3).epsilon(1e-9));
}

// The seed example of data-parallel overlap: a 100 ms backward pass whose gradients need a
// 50 ms all-reduce. Overlapped bucket by bucket, only the last bucket's reduction is exposed
// (100 + 50/n ms, about 100 ms); reduced after the backward pass, 150 ms.
TEST_CASE("engine: DDP overlap, 100 ms backward + 50 ms all-reduce", "[engine][closed-form]") {
  constexpr int kBuckets = 10;
  Scenario s = cluster(1, 1, 2, false);  // two nodes, data parallel over the NICs
  // The seed example's closed form has compute unaffected by the communication beside it; the
  // SMs NCCL's kernels take from compute are tested on their own below.
  s.topology.collectives.intra_sms = s.topology.collectives.inter_sms = s.topology.collectives.p2p_sms = 0;
  // Bytes per bucket whose all-reduce alone takes 5 ms (bisection on the network model).
  int64_t lo = 1, hi = int64_t{1} << 40;
  {
    NetworkModel net(s.topology, layout_of(s));
    CommRequest q;
    q.kind = sim::CollKind::all_reduce;
    q.group = GroupKind::dp;
    q.members = {0, 1};
    while (hi - lo > 1) {
      q.bytes = lo + (hi - lo) / 2;
      (net.isolated_time_us(q) < 50'000.0 / kBuckets ? lo : hi) = q.bytes;
    }
  }
  auto run = [&](bool overlap) {
    Scenario sc = s;
    Hand h(sc, 0);
    std::vector<BufferId> grads;
    for (int i = 0; i < kBuckets; ++i)
      grads.push_back(h.b.buffer("grads" + std::to_string(i), lo / 2, DType::bf16, MemCategory::grads, true));
    OpId last = kNoOp;
    std::vector<OpId> producers;
    for (int i = 0; i < kBuckets; ++i) {  // each bucket's gradients: two 5 ms GEMMs
      h.timed(Stream::compute, 5'000, {}, {h.b.whole(grads[static_cast<size_t>(i)])});
      last = h.timed(Stream::compute, 5'000, {}, {h.b.whole(grads[static_cast<size_t>(i)])});
    }
    for (int i = 0; i < kBuckets; ++i)
      h.collective(paralab::CollKind::all_reduce, GroupKind::dp, lo, 100 + static_cast<uint32_t>(i),
                   {h.b.whole(grads[static_cast<size_t>(i)])}, Stream::dp_comm,
                   overlap ? std::vector<OpId>{} : std::vector<OpId>{last});
    const StepIR ir = wrap(sc, {h.b.finish()});
    return simulate(ir).result.step_time_s;
  };
  const double overlapped = run(true), serial = run(false);
  CHECK(serial == Approx(0.150).epsilon(0.005));
  CHECK(overlapped == Approx(0.100 + 0.050 / kBuckets).epsilon(0.005));
  CHECK(overlapped < 0.11);
}

// Communication kernels hold SMs (NCCL: one thread block per channel, not shared with compute;
// topologies/dgx-a100.toml), so compute beside them runs at rate r = (SMs - held) / SMs. A 10 ms
// compute op with a 5 ms all-reduce beside it from t = 0 does 5 r ms of work in the first 5 ms
// and the rest at full speed: it ends at 5 + (10 - 5 r) ms. Two collectives at once hold the
// sum of their SMs; when they end the op speeds up again.
TEST_CASE("engine: compute beside communication runs on the SMs it leaves (closed form)", "[engine][closed-form]") {
  Scenario s = cluster(1, 1, 2, false);  // two nodes: the dp all-reduce crosses nodes
  const CollectiveSpec& c = s.topology.collectives;
  REQUIRE(c.inter_sms > 0);
  REQUIRE(s.topology.device.kind == DeviceKind::gpu);
  const double sms = static_cast<double>(s.topology.device.sm_count);
  int64_t lo = 1, hi = int64_t{1} << 40;  // bytes of a 5 ms all-reduce
  {
    NetworkModel net(s.topology, layout_of(s));
    CommRequest q;
    q.kind = sim::CollKind::all_reduce;
    q.group = GroupKind::dp;
    q.members = {0, 1};
    while (hi - lo > 1) {
      q.bytes = lo + (hi - lo) / 2;
      (net.isolated_time_us(q) < 5'000.0 ? lo : hi) = q.bytes;
    }
  }
  auto run = [&](const Topology& topo, int collectives) {
    Scenario sc = s;
    sc.topology.collectives = topo.collectives;
    Hand h(sc, 0);
    const BufferId g = h.b.buffer("grads", lo / 2, DType::bf16, MemCategory::grads, true);
    const BufferId g2 = h.b.buffer("grads2", lo / 2, DType::bf16, MemCategory::grads, true);
    const OpId work = h.timed(Stream::compute, 10'000);
    h.collective(paralab::CollKind::all_reduce, GroupKind::dp, lo, 100, {h.b.whole(g)}, Stream::dp_comm);
    if (collectives > 1)  // a second one at once, on another stream
      h.collective(paralab::CollKind::all_reduce, GroupKind::dp, lo, 101, {h.b.whole(g2)}, Stream::tp_comm);
    const StepIR ir = wrap(sc, {h.b.finish()});
    const StepResult r = simulate(ir).result;
    return timing_of(r, 0, work)->end_us;
  };
  Topology off = s.topology;
  off.collectives.intra_sms = off.collectives.inter_sms = off.collectives.p2p_sms = 0;
  CHECK(run(off, 1) == Approx(10'000.0));
  const double r1 = (sms - static_cast<double>(c.inter_sms)) / sms;
  CHECK(run(s.topology, 1) == Approx(5'000.0 + (10'000.0 - 5'000.0 * r1)).epsilon(0.002));
  // Two all-reduces share the NICs: both take about 10 ms, holding 2 x inter_sms meanwhile; the
  // op then ends at 10 + (10 - 10 r2) ms.
  const double r2 = (sms - 2.0 * static_cast<double>(c.inter_sms)) / sms;
  const double t2 = run(s.topology, 2);
  CHECK(t2 == Approx(10'000.0 + (10'000.0 - 10'000.0 * r2)).epsilon(0.005));
  CHECK(t2 > run(s.topology, 1));
}

TEST_CASE("engine: a pipeline transfer starts when both its send and its receive are ready", "[engine]") {
  Scenario s = cluster(1, 2, 1);
  Hand h0(s, 0);
  const BufferId act = h0.b.buffer("act", 1024, DType::bf16, MemCategory::activations);
  h0.timed(Stream::compute, 10'000, {}, {h0.b.whole(act)});
  const OpId send = h0.p2p(true, 2048, kTagP2PBase, {h0.b.whole(act)});
  h0.b.release(act);
  Hand h1(s, 1);
  const BufferId in = h1.b.buffer("in", 1024, DType::bf16, MemCategory::activations);
  const OpId recv = h1.p2p(false, 2048, kTagP2PBase, {h1.b.whole(in)});  // posted at 0
  const OpId use = h1.timed(Stream::compute, 1'000, {h1.b.whole(in)});
  h1.b.release(in);
  const StepIR ir = wrap(s, {h0.b.finish(), h1.b.finish()});
  const StepResult r = simulate(ir).result;
  const int64_t r1 = ir.layout.representative(1);
  CHECK(timing_of(r, 0, send)->start_us == Approx(10'000.0));
  CHECK(timing_of(r, r1, recv)->start_us == Approx(10'000.0));  // waited for the sender, not "in flight"
  CHECK(timing_of(r, r1, recv)->end_us == timing_of(r, 0, send)->end_us);
  CHECK(timing_of(r, r1, use)->start_us == Approx(10'000.0).margin(1.0));
  // Stage 1 idled 10 ms waiting: bubble, not exposed communication.
  CHECK(r.bubble_fraction > 0.4);
}

TEST_CASE("engine: a collective joining stages starts when the last stage reaches it", "[engine]") {
  Scenario s = cluster(1, 2, 1);
  Hand h0(s, 0), h1(s, 1);
  const BufferId f0 = h0.b.buffer("flag", 1, DType::f32, MemCategory::buffers, true);
  const BufferId f1 = h1.b.buffer("flag", 1, DType::f32, MemCategory::buffers, true);
  h0.timed(Stream::compute, 10'000, {}, {h0.b.whole(f0)});
  h1.timed(Stream::compute, 30'000, {}, {h1.b.whole(f1)});
  const OpId c0 = h0.collective(paralab::CollKind::all_reduce, GroupKind::mp, 4, kTagGradNorm, {h0.b.whole(f0)}, Stream::dp_comm);
  const OpId c1 = h1.collective(paralab::CollKind::all_reduce, GroupKind::mp, 4, kTagGradNorm, {h1.b.whole(f1)}, Stream::dp_comm);
  const StepIR ir = wrap(s, {h0.b.finish(), h1.b.finish()});
  const StepResult r = simulate(ir).result;
  const int64_t r1 = ir.layout.representative(1);
  CHECK(timing_of(r, 0, c0)->start_us == Approx(30'000.0));
  CHECK(timing_of(r, r1, c1)->start_us == Approx(30'000.0));
  CHECK(timing_of(r, 0, c0)->end_us == timing_of(r, r1, c1)->end_us);
}

TEST_CASE("engine: memory over time, peak and the moment a rank runs out", "[engine][memory]") {
  Scenario s = cluster(1, 1, 1);
  Hand h(s, 0);
  const int64_t gib_elems = static_cast<int64_t>(kGiB / 4);
  h.b.buffer("weights", gib_elems, DType::f32, MemCategory::weights, true);  // 1 GiB resident
  const BufferId x = h.b.buffer("x", gib_elems, DType::f32, MemCategory::activations);
  const BufferId y = h.b.buffer("y", 2 * gib_elems, DType::f32, MemCategory::activations);
  h.timed(Stream::compute, 10'000, {}, {h.b.whole(x)});                           // x allocated at 0
  const OpId b = h.timed(Stream::compute, 10'000, {h.b.whole(x)}, {h.b.whole(y)});  // y at 10 ms
  h.b.release(x);                                                                 // x freed at 20 ms
  h.timed(Stream::compute, 10'000, {h.b.whole(y)});
  h.b.release(y);

  SECTION("fits: peak = resident + x + y, reached when b starts") {
    const StepIR ir = wrap(s, {h.b.finish()});
    const Simulation sim = simulate(ir);
    REQUIRE(sim.memory.size() == 1);
    CHECK(sim.memory[0].peak_total() == Approx(4 * kGiB));
    CHECK(sim.memory[0].peak_time_us == Approx(10'000.0));
    CHECK(sim.memory[0].peak_op == b);
    CHECK(sim.memory[0].at_peak[static_cast<size_t>(MemCategory::activations)] == Approx(3 * kGiB));
    CHECK(sim.result.peak_memory_gib == Approx(4.0));
    CHECK(sim.result.fits_in_memory);
  }
  SECTION("does not fit: the rank and the moment are reported") {
    s.topology.device.memory_gib = 3.5;
    const StepIR ir = wrap(s, {h.b.finish()});
    const Simulation sim = simulate(ir);
    CHECK_FALSE(sim.result.fits_in_memory);
    REQUIRE(sim.result.oom_rank.has_value());
    CHECK(*sim.result.oom_rank == 0);
    CHECK(sim.result.oom_time_us == Approx(10'000.0));
    CHECK(sim.memory[0].over_capacity_op == b);
  }
}

TEST_CASE("engine: unmatched transfers are reported, not simulated forever", "[engine]") {
  Scenario s = cluster(1, 2, 1);
  Hand h0(s, 0), h1(s, 1);
  const BufferId a = h0.b.buffer("a", 16, DType::bf16, MemCategory::buffers, true);
  const BufferId b = h1.b.buffer("b", 16, DType::bf16, MemCategory::buffers, true);
  h0.p2p(true, 32, kTagP2PBase, {h0.b.whole(a)});
  h1.p2p(false, 32, kTagP2PBase + 2, {h1.b.whole(b)});  // a different tag: never matched
  const StepIR ir = wrap(s, {h0.b.finish(), h1.b.finish()});
  CHECK_THROWS_AS(simulate(ir), InternalError);
  CHECK_THROWS_WITH(simulate(ir), Catch::Contains("cannot complete") && Catch::Contains("stage 1"));
}
