// paralab tests — compare joins results op by op and reports the errors it should.
#include <catch2/catch.hpp>

#include <fstream>

#include "analysis/validate/compare.hpp"
#include "ir/step_ir.hpp"
#include "results/result_io.hpp"
#include "../ir/test_util.hpp"

using namespace paralab;

namespace {

// A synthetic result: each op of each stage's representative runs back to back on its stream
// for `scale` times a duration derived from its id (deterministic, never zero).
StepResult synthetic(const StepIR& ir, double scale, bool all_ranks) {
  StepResult r;
  r.kind = "predicted";
  for (int64_t rank = 0; rank < ir.layout.world(); ++rank) {
    if (!all_ranks && rank != ir.layout.representative(ir.layout.stage_of(rank))) continue;
    const StepGraph& g = ir.graph_for(rank);
    std::array<double, kStreams> clock{};
    for (const Op& op : g.ops) {
      double& t = clock[static_cast<size_t>(op.stream)];
      const double d = scale * (2.0 + static_cast<double>(op.id % 7));
      r.ops.push_back({rank, op.id, t, t + d});
      t += d;
    }
    r.ranks.push_back({rank, g.stage, 1e9, 0, 0, {}});
  }
  finalize(r, ir);
  return r;
}

LoadedResult round_trip(const StepResult& r, const StepIR& ir, const std::string& name) {
  test::TempFile f(trace_json(r, ir), name);
  return read_result(f.path());
}

}  // namespace

TEST_CASE("a result compared with itself has no error", "[analysis][compare]") {
  const StepIR ir = build_step_ir(test::scenario_from(test::tiny_gpt(), {"parallel.pipeline=2", "parallel.tensor=2"}));
  const StepResult pred = synthetic(ir, 1.0, false);
  const StepResult meas = synthetic(ir, 1.0, true);
  const Comparison c = compare(round_trip(pred, ir, "p.json"), round_trip(meas, ir, "m.json"));
  CHECK(c.per_op);
  CHECK(c.step_time_error_pct == Approx(0).margin(1e-9));
  CHECK(c.op_mape_pct == Approx(0).margin(1e-9));
  // Every measured rank's ops joined the prediction of its stage.
  CHECK(c.ops_joined == static_cast<int64_t>(meas.ops.size()));
}

TEST_CASE("a prediction 10% slow on every op is 10% off", "[analysis][compare]") {
  const StepIR ir = build_step_ir(test::scenario_from(test::tiny_gpt(), {"parallel.pipeline=2"}));
  const Comparison c =
      compare(round_trip(synthetic(ir, 1.1, false), ir, "p.json"), round_trip(synthetic(ir, 1.0, true), ir, "m.json"), 5);
  CHECK(c.step_time_error_pct == Approx(10.0).epsilon(1e-6));
  CHECK(c.op_mape_pct == Approx(10.0).epsilon(1e-6));
  REQUIRE(c.largest.size() == 5);
  CHECK(c.largest[0].predicted_us > c.largest[0].measured_us);
  double cls_pred = 0, cls_meas = 0;
  for (const auto& ce : c.by_class) {
    CHECK(ce.error_pct() == Approx(10.0).epsilon(1e-6));
    cls_pred += ce.predicted_s;
    cls_meas += ce.measured_s;
  }
  CHECK(cls_pred == Approx(1.1 * cls_meas));
  // Classes are the documented ones.
  bool saw_gemm = false, saw_collective = false;
  for (const auto& ce : c.by_class) {
    saw_gemm |= ce.cls.rfind("gemm ", 0) == 0;
    saw_collective |= ce.cls == "all_reduce dp";
  }
  CHECK(saw_gemm);
  CHECK(saw_collective);
}

TEST_CASE("results of different scenarios are refused", "[analysis][compare]") {
  const StepIR a = build_step_ir(test::scenario_from(test::tiny_gpt(), {}));
  const StepIR b = build_step_ir(test::scenario_from(test::tiny_gpt(), {"model.num_layers=4"}));
  REQUIRE_THROWS_WITH(compare(round_trip(synthetic(a, 1, false), a, "a.json"), round_trip(synthetic(b, 1, false), b, "b.json")),
                      Catch::Contains("different scenarios"));
}

TEST_CASE("results with missing ops are refused", "[analysis][compare]") {
  const StepIR ir = build_step_ir(test::scenario_from(test::tiny_gpt(), {}));
  StepResult meas = synthetic(ir, 1, true);
  meas.ops.erase(meas.ops.begin() + 3);
  REQUIRE_THROWS_WITH(compare(round_trip(synthetic(ir, 1, false), ir, "p.json"), round_trip(meas, ir, "m.json")),
                      Catch::Contains("different ops"));
}

TEST_CASE("summaries alone compare step-level figures", "[analysis][compare]") {
  const StepIR ir = build_step_ir(test::scenario_from(test::tiny_gpt(), {}));
  test::TempFile p(summary_json(synthetic(ir, 2, false)).dump(), "p.json");
  test::TempFile m(summary_json(synthetic(ir, 1, true)).dump(), "m.json");
  const Comparison c = compare(read_result(p.path()), read_result(m.path()));
  CHECK_FALSE(c.per_op);
  CHECK(c.step_time_error_pct == Approx(100.0));
}

TEST_CASE("unreadable results name the file", "[analysis][compare]") {
  test::TempFile bad("{ not json", "bad.json");
  REQUIRE_THROWS_WITH(read_result(bad.path()), Catch::Contains("bad.json"));
  test::TempFile trace("{\"traceEvents\": []}", "t.json");
  REQUIRE_THROWS_WITH(read_result(trace.path()), Catch::Contains("otherData.paralab"));
}

TEST_CASE("a member's wait for a late peer within its stage is host time, not bubble", "[analysis][compare]") {
  // TP 2: both ranks run the same ops back to back. Rank 0 posts every collective W us before
  // rank 1 and both end together, C us after rank 1 posted it (a measured call as executed:
  // rank 0's interval holds its wait).
  const StepIR ir = build_step_ir(test::scenario_from(test::tiny_gpt(), {"parallel.tensor=2"}));
  constexpr double W = 300.0, C = 40.0, K = 7.0;
  StepResult m;
  m.kind = "measured";
  double t = 0;
  int64_t calls = 0;
  double compute_us = 0;
  const StepGraph& g0 = ir.graph_for(0);
  for (const Op& op : g0.ops) {
    const bool call = op.kind == OpKind::collective && ir.group_of(0, op).size() == 2;
    if (call) {
      m.ops.push_back({0, op.id, t, t + W + C});
      m.ops.push_back({1, op.id, t + W, t + W + C});
      t += W + C;
      ++calls;
    } else {
      const double d = is_comm(op.kind) ? 0.0 : K + static_cast<double>(op.id % 5);
      m.ops.push_back({0, op.id, t, t + d});
      m.ops.push_back({1, op.id, t, t + d});
      t += d;
      if (op.stream == Stream::compute) compute_us += d;
    }
  }
  REQUIRE(calls > 0);
  for (int64_t rank = 0; rank < 2; ++rank) m.ranks.push_back({rank, 0, 0, 0, 0, {}});
  finalize(m, ir);
  for (const RankStats& rs : m.ranks) {
    INFO("rank " << rs.rank);
    // Both ranks: C of communication per call, W of waiting on a host (idle, nothing moving yet;
    // no pipeline, so no bubble).
    double exposed = 0;
    for (double x : rs.breakdown.exposed_comm_s) exposed += x;
    CHECK(exposed == Approx(static_cast<double>(calls) * C * 1e-6));
    CHECK(rs.breakdown.host_s == Approx(static_cast<double>(calls) * W * 1e-6));
    CHECK(rs.breakdown.bubble_s == 0.0);
    CHECK(rs.breakdown.compute_s == Approx(compute_us * 1e-6));
  }
  // The trace keeps the op as executed: rank 0's first call still spans its wait.
  bool saw = false;
  for (const OpTiming& o : m.ops)
    if (o.rank == 0 && !saw && g0.op(o.op).kind == OpKind::collective && ir.group_of(0, g0.op(o.op)).size() == 2) {
      CHECK(o.end_us - o.start_us == Approx(W + C));
      saw = true;
    }
  CHECK(saw);
}

// Idle time named truthfully (results/step_result.hpp, Breakdown): a stage waiting on its
// pipeline peer (a receive posted before its transfer began) is bubble, and so is the
// pipeline's fill and drain; a gap with nothing posted is host time.
TEST_CASE("waiting on a pipeline peer is bubble, waiting on one's own host is host time", "[analysis][compare]") {
  const StepIR ir = build_step_ir(test::scenario_from(test::tiny_gpt(), {"parallel.pipeline=2", "model.num_layers=2"}));
  constexpr double Gap = 2.0, Wait = 50.0, D = 10.0;
  // Stage 0: its ops 10 us each, a 2 us gap before every one.
  std::vector<OpTiming> ops0;
  double t0 = 0;
  for (const Op& op : ir.graph_for(0).ops) {
    t0 += Gap;
    ops0.push_back({0, op.id, t0, t0 + D, t0});
    t0 += D;
  }
  // Stage 1: back to back, each receive posted 50 us before its transfer began.
  const int64_t r1 = ir.layout.representative(1);
  std::vector<OpTiming> ops1;
  double t1 = 0;
  int64_t waits = 0;
  for (const Op& op : ir.graph_for(r1).ops) {
    const double wait = op.kind == OpKind::recv ? Wait : 0.0;
    waits += op.kind == OpKind::recv;
    ops1.push_back({r1, op.id, t1 + wait, t1 + wait + D, t1});
    t1 += wait + D;
  }
  REQUIRE(waits > 0);
  const Breakdown b1 = rank_breakdown(ir, r1, ops1);
  CHECK(b1.bubble_s == Approx(static_cast<double>(waits) * Wait * 1e-6));
  CHECK(b1.host_s == 0.0);
  const Breakdown b0 = rank_breakdown(ir, 0, ops0);
  CHECK(b0.host_s == Approx(static_cast<double>(ops0.size() - 1) * Gap * 1e-6));  // the first gap lies before its span
  CHECK(b0.bubble_s == 0.0);
  // In the step's window stage 0 idles before its first op and after its last while stage 1 runs: bubble.
  const double end = std::max(t0, t1) + 1000.0;
  const Breakdown w0 = rank_breakdown(ir, 0, ops0, 0.0, end);
  CHECK(w0.bubble_s == Approx((end - t0 + Gap) * 1e-6));
  CHECK(w0.host_s == Approx(b0.host_s));
}
