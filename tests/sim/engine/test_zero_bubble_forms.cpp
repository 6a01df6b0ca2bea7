// paralab — the zero-bubble schedules' closed forms against the engine, in Qi et al.'s notation
// (ICLR 2024, "Zero Bubble Pipeline Parallelism", Table 1 / Sec. 3): F forward, B input
// gradient, W weight gradient of one micro-batch on one stage. With p equal stages the pipeline
// bubble (time a stage is idle between its first forward and its last backward) is
//   1F1B   (p-1)(F+B+W)
//   ZB-H1  (p-1)(F+B-W)
//   ZB-H2  (p-1)(F+B-2W)
// and a stage's activations peak at p micro-batches (1F1B, ZB-H1) or 2p-1 (ZB-H2). F, B and W
// are measured on the engine's own ops (phases forward, backward, wgrad of micro-batch 0 on an
// inner stage); the bubble is, as Qi et al. count it (Sec. 5.1: the largest execution time of
// all stages less the work), the most a stage idles between its first and its last op.
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>

#include "engine_test_util.hpp"

using namespace paralab;
using namespace paralab::sim;
using namespace paralab::sim::test;

namespace {

// Four equal stages (four_equal_stages) of sixteen wide layers, a free network. The first
// stage's embedding makes its F ~0.1 % longer than the others'; ZB-H2's bubble on that stage
// carries the difference 6 times (seven warm-up forwards against one chain), ~0.5 % of it.
struct ZbRun {
  double f_us = 0, b_us = 0, w_us = 0;  // stage 1's (no embedding, no head), one micro-batch
  double bubble_us = 0;                 // the most any stage idles between its first and last op
  double peak_bytes = 0;                // stage 0's peak memory
  int64_t p = 0, m = 0;
};

ZbRun run(const std::string& schedule) {
  Scenario s = load_inline(four_equal_stages(), {"topology.node.devices_per_node=4", "model.num_layers=64",
                                           "parallel.schedule=" + schedule});
  free_network(s.topology);
  const StepIR ir = build_step_ir(s);
  const StepResult r = simulate(ir).result;
  ZbRun out;
  out.p = s.parallel.pipeline;
  out.m = s.num_microbatches();
  for (const RankStats& rs : r.ranks)
    if (rs.stage == 0) out.peak_bytes = rs.peak_memory_bytes;
  for (int64_t st = 0; st < out.p; ++st) {
    const StepGraph& g = ir.stages[static_cast<size_t>(st)];
    const int64_t rank = ir.layout.representative(st);
    double first = std::numeric_limits<double>::max(), last = 0, busy = 0, f = 0, b = 0, w = 0;
    for (const OpTiming& ot : r.ops) {
      if (ot.rank != rank) continue;
      const Op& op = g.op(ot.op);
      if (op.stream != Stream::compute || op.phase == Phase::optimizer) continue;
      const double d = ot.end_us - ot.start_us;
      first = std::min(first, ot.start_us);
      last = std::max(last, ot.end_us);
      busy += d;
      if (op.microbatch == 0) (op.phase == Phase::forward ? f : op.phase == Phase::weight_grad ? w : b) += d;
    }
    out.bubble_us = std::max(out.bubble_us, last - first - busy);
    if (st == 1) out.f_us = f, out.b_us = b, out.w_us = w;
  }
  return out;
}

}  // namespace

TEST_CASE("closed form: zero-bubble bubbles (p-1)(F+B-W) and (p-1)(F+B-2W)", "[engine][closed-form][schedule]") {
  // F, B and W from a split backward; 1F1B runs the same ops with B and W fused.
  const ZbRun h1 = run("zb-h1");
  REQUIRE(h1.p == 4);
  REQUIRE(h1.m == 8);
  const double F = h1.f_us, B = h1.b_us, W = h1.w_us, p1 = static_cast<double>(h1.p - 1);
  // A transformer layer's W is its weight-gradient GEMMs, about its forward GEMMs; B is more
  // (it also holds attention's backward and the element-wise kernels).
  REQUIRE(W > 0.5 * F);
  REQUIRE(B > W);
  const ZbRun one = run("1f1b"), h2 = run("zb-h2");
  CHECK(one.f_us + one.b_us + one.w_us == Approx(F + B + W).epsilon(0.001));
  CHECK(one.bubble_us == Approx(p1 * (F + B + W)).epsilon(0.01));
  CHECK(h1.bubble_us == Approx(p1 * (F + B - W)).epsilon(0.01));
  CHECK(h2.bubble_us == Approx(p1 * (F + B - 2 * W)).epsilon(0.01));

  // Activation memory: 1F1B and ZB-H1 hold p micro-batches on stage 0, ZB-H2 2p-1 and GPipe m.
  // Weights, gradients and buffers are the same under every schedule, so differences of peaks
  // count micro-batches: (2p-1 - p) / (m - p).
  const ZbRun gpipe = run("gpipe");
  const double per_mb = (gpipe.peak_bytes - one.peak_bytes) / static_cast<double>(h1.m - h1.p);
  REQUIRE(per_mb > 0);
  CHECK(h1.peak_bytes == Approx(one.peak_bytes).epsilon(0.01));
  CHECK((h2.peak_bytes - one.peak_bytes) / per_mb == Approx(p1).epsilon(0.01));
}
