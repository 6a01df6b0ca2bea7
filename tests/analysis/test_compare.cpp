// paralab tests — compare joins results op by op and reports the errors it should.
#include <catch2/catch.hpp>

#include <fstream>

#include "analysis/compare.hpp"
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

TEST_CASE("a member's wait for a late peer is bubble in the breakdown, as the simulator reports it", "[analysis][compare]") {
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
    // Both ranks: C of communication per call, W of waiting (idle, nothing moving yet).
    double exposed = 0;
    for (double x : rs.breakdown.exposed_comm_s) exposed += x;
    CHECK(exposed == Approx(static_cast<double>(calls) * C * 1e-6));
    CHECK(rs.breakdown.bubble_s == Approx(static_cast<double>(calls) * W * 1e-6));
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

TEST_CASE("a predicted stall travels in the trace and is its op's busy time, not its compared time", "[analysis][compare]") {
  // One rank, every op after the last 5 us apart; each compute op but the last carries a 3 us
  // stall (OpTiming::stall_us, as the engine records DeviceSpec::compute_tail).
  const StepIR ir = build_step_ir(test::scenario_from(test::tiny_gpt()));
  constexpr double G = 5.0, S = 3.0;
  StepResult plain, stalled;
  const StepGraph& g = ir.graph_for(0);
  double t = 0, compute_us = 0;
  int64_t stalls = 0;
  for (const Op& op : g.ops) {
    const double d = 2.0 + static_cast<double>(op.id % 7);
    const bool compute = op.stream == Stream::compute;
    const bool last = op.id + 1 == g.ops.size();
    plain.ops.push_back({0, op.id, t, t + d});
    stalled.ops.push_back({0, op.id, t, t + d, compute && !last ? S : 0.0});
    if (compute) compute_us += d;
    if (compute && !last) ++stalls;
    t += d + G;
  }
  REQUIRE(stalls > 10);
  for (StepResult* r : {&plain, &stalled}) {
    r->ranks.push_back({0, 0, 1e9, 0, 0, {}});
    finalize(*r, ir);
  }
  CHECK(stalled.step_time_s == plain.step_time_s);
  CHECK(stalled.breakdown.compute_s == Approx((compute_us + S * static_cast<double>(stalls)) * 1e-6));
  CHECK(plain.breakdown.compute_s == Approx(compute_us * 1e-6));
  CHECK(plain.breakdown.bubble_s - stalled.breakdown.bubble_s == Approx(S * static_cast<double>(stalls) * 1e-6));
  // The trace keeps it (args.stall_us), the ops' own times are what compare scores.
  const LoadedResult back = round_trip(stalled, ir, "stalled.json");
  REQUIRE(back.result.ops.size() == stalled.ops.size());
  for (size_t i = 0; i < back.result.ops.size(); ++i) CHECK(back.result.ops[i].stall_us == Approx(stalled.ops[i].stall_us));
  CHECK(rank_breakdown(ir, 0, back.result.ops).compute_s == Approx(stalled.breakdown.compute_s));
  const Comparison c = compare(back, round_trip(plain, ir, "plain.json"));
  CHECK(c.op_mape_pct == Approx(0).margin(1e-9));
  CHECK(c.step_time_error_pct == Approx(0).margin(1e-9));
  CHECK(c.bubble_predicted < c.bubble_measured);
  // A stall past the window given is cut at its end.
  StepResult over = stalled;
  over.ops.back().stall_us = 1e6;
  const Breakdown b = rank_breakdown(ir, 0, over.ops, over.ops.front().start_us, over.ops.back().end_us);
  double exposed = 0;
  for (double x : b.exposed_comm_s) exposed += x;
  CHECK(b.compute_s + exposed + b.bubble_s == Approx(stalled.step_time_s));
}
