// paralab tests — the calibrated topology: written from measurements, it loads as a topology,
// simulates, and the simulator takes the measured time of every op whose shape was measured;
// the fitted device and link values land in the documented keys. The corrections read back from
// a step simulated with known ones. Validate's alignment of measured communication.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "analysis/calibration/calibrate.hpp"
#include "analysis/calibration/corrections.hpp"
#include "analysis/calibration/measure.hpp"
#include "analysis/calibration/samples.hpp"
#include "analysis/validate/validate.hpp"
#include "ir/step_ir.hpp"
#include "ir/topology_loader.hpp"
#include "results/comm_alignment.hpp"
#include "sim/compute/compute_model.hpp"
#include "sim/engine/overhead.hpp"
#include "sim/simulate.hpp"
#include "../ir/test_util.hpp"
#include "calibrate_test_util.hpp"

using namespace paralab;
using namespace paralab::calib;
using namespace paralab::calib::testing;

TEST_CASE("a calibrated topology loads, simulates and takes the measured op times", "[analysis][calibrate]") {
  const StepIR base_ir = build_step_ir(test::scenario_from(cpu_scenario("cpu-host")));
  CalibrationResult r = synthetic_result(base_ir);
  // An executed scenario: its steps go into the file for validate to hold its executions against.
  for (double s : {0.012, 0.010, 0.011}) {
    StepResult step;
    step.step_time_s = s;
    if (r.executions.empty()) r.executions.push_back({"cpu-tp2.toml", "cpu-tp2", "af765c8ba317", {}});
    r.executions[0].steps.push_back(step);
  }

  // The fits found the synthetic parameters.
  REQUIRE(r.gemm.count(MathMode::f32));
  CHECK(r.gemm.at(MathMode::f32).flop_per_us == Approx(40e3).epsilon(0.05));
  REQUIRE(r.comm_fit);
  CHECK(r.comm_fit->launch_us == Approx(20).epsilon(0.02));
  CHECK(r.comm_fit->step_us == Approx(4).epsilon(0.02));
  CHECK(r.comm_fit->gbps() == Approx(3.0).epsilon(0.02));

  test::TempFile topo(calibration_toml(r), "calibrated.toml");
  const Topology t = load_topology(topo.path());  // the simulator accepts it as it is
  CHECK(t.name == "cpu-host-calibrated");
  CHECK(t.device.kind == DeviceKind::cpu);
  CHECK(t.node.intra_link.bw_gbps == Approx(3.0).epsilon(0.02));
  CHECK(t.node.intra_link.lat_us == Approx(4.0).epsilon(0.02));
  CHECK(t.collectives.launch_lat_us == Approx(20.0).epsilon(0.02));
  CHECK(t.device.mem_bw_gbps == Approx(10.0));
  CHECK(t.node.cores == 2);  // a CPU host: the cores its ranks share
  // GEMM rate = peak x efficiency (docs/calibration.md).
  CHECK(t.device.peak(MathMode::f32) * t.device.gemm_max_efficiency * 1e6 == Approx(40e3).epsilon(0.05));
  CHECK(t.calibration.schema_version == kCalibrationSchema);
  CHECK_FALSE(t.calibration.source.empty());
  CHECK(t.calibration.gemm.size() + t.calibration.kernels.size() == r.compute.size());
  REQUIRE(t.calibration.executions.size() == 1);
  CHECK(t.calibration.executions[0].scenario == "cpu-tp2");
  CHECK(t.calibration.executions[0].digest == "af765c8ba317");
  CHECK(t.calibration.executions[0].executions == 3);
  CHECK(t.calibration.executions[0].step_median_s == Approx(0.011));
  CHECK(t.calibration.executions[0].step_min_s == Approx(0.010));
  CHECK(t.calibration.executions[0].step_max_s == Approx(0.012));

  // A scenario on the calibrated topology: every compute op takes its point's median.
  const Scenario s = test::scenario_from(cpu_scenario(topo.path().string()));
  const StepIR ir = build_step_ir(s);
  const sim::ComputeModel cm(ir.scenario.topology);
  std::map<OpKey, double> med;
  for (const OpSamples& x : r.compute) med[x.key] = x.median_us();
  int64_t checked = 0;
  for (const Op& op : ir.stages[0].ops) {
    if (is_comm(op.kind)) continue;
    const OpKey k = op_key(op);
    if (k.kind != OpKind::gemm && k.bytes <= 0) continue;
    INFO(k.str());
    CHECK(cm.duration_us(op) == Approx(med.at(k)).epsilon(1e-5));
    ++checked;
  }
  CHECK(checked > 20);
  const sim::Simulation sim = sim::simulate(ir);
  CHECK(sim.result.step_time_s > 0);
  CHECK(sim.result.topology == "cpu-host-calibrated");
}

// With more ranks than cores calibrate times replayed ops by thread CPU time: every op the
// wall-clock pass times is timed, each a positive time no longer than the pass itself took.
TEST_CASE("replayed ops can be timed by the thread's CPU time", "[analysis][calibrate]") {
  const StepIR ir = build_step_ir(test::scenario_from(cpu_scenario("cpu-host", 1, 1)));
  Replayer wall(ir, 0, "cpu"), cpu(ir, 0, "cpu");
  cpu.use_thread_cpu_time();
  const auto all = [](const Op&) { return true; };
  std::vector<std::pair<OpId, double>> tw, tc;
  wall.pass(all, tw);
  const auto t0 = std::chrono::steady_clock::now();
  cpu.pass(all, tc);
  const double pass_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  std::sort(tw.begin(), tw.end());
  std::sort(tc.begin(), tc.end());
  REQUIRE(tc.size() == tw.size());
  REQUIRE(tc.size() > 20);
  double sum = 0;
  for (size_t i = 0; i < tc.size(); ++i) {
    CHECK(tc[i].first == tw[i].first);
    CHECK(tc[i].second >= 0.0);
    sum += tc[i].second;
  }
  CHECK(sum > 0.0);
  CHECK(sum <= pass_us);
}


// The closed loop: a step simulated on a topology with known corrections, read back as the
// measurement of the same step simulated without them, gives those corrections back.
TEST_CASE("corrections are read back from a step simulated with known ones", "[analysis][calibrate]") {
  Scenario plain = test::scenario_from(cpu_scenario("cpu-host", 2, 1));
  plain.topology.collectives.intra_sms = plain.topology.collectives.inter_sms = plain.topology.collectives.p2p_sms = 0;
  Scenario corrected = plain;
  OpClass all_reduce{CostKind::time, OpFamily::comm, OpKind::collective, CollKind::all_reduce};
  corrected.topology.calibration.corrections = CorrectionTable({
      CorrectionRow{OpClass{CostKind::dispatch}, Correction{5.0, 1.0}},
      CorrectionRow{OpClass{CostKind::handoff, OpFamily::compute}, Correction{12.0, 1.0}},
      CorrectionRow{OpClass{CostKind::handoff, OpFamily::comm}, Correction{30.0, 1.0}},
      CorrectionRow{all_reduce, Correction{40.0, 1.5}},
  });
  const StepIR ir = build_step_ir(plain), ir_c = build_step_ir(corrected);
  const sim::Simulation uncorrected = sim::simulate(ir), truth = sim::simulate(ir_c);
  StepResult measured = truth.result;
  measured.kind = "measured";
  const sim::ComputeModel cm(plain.topology);
  std::vector<std::vector<double>> modeled;
  for (const StepGraph& g : ir.stages) modeled.push_back(cm.durations(g));
  const CorrectionSamples samples = correction_samples(ir, {measured}, uncorrected.result, modeled);
  const std::vector<CorrectionRow> rows = fit_corrections(samples);
  auto find = [&](const OpClass& c) -> const CorrectionRow* {
    for (const CorrectionRow& r : rows)
      if (r.cls == c) return &r;
    return nullptr;
  };
  const CorrectionRow* d = find(OpClass{CostKind::dispatch});
  REQUIRE(d);
  CHECK(d->c.fixed_us == Approx(5.0).margin(0.05));
  const CorrectionRow* hc = find(OpClass{CostKind::handoff, OpFamily::compute});
  const CorrectionRow* hm = find(OpClass{CostKind::handoff, OpFamily::comm});
  const CorrectionRow* h = find(OpClass{CostKind::handoff});
  // The hand-offs: either split by family, or one family at the root and the other beside it.
  const double compute_us = hc ? hc->c.fixed_us : h ? h->c.fixed_us : -1;
  const double comm_us = hm ? hm->c.fixed_us : h ? h->c.fixed_us : -1;
  CHECK(compute_us == Approx(12.0).margin(0.05));
  CHECK(comm_us == Approx(30.0).margin(0.05));
  // The all-reduces' time (at their kind, or higher where every call of the step is one): the
  // step's all-reduces are of one size, so fixed and factor are not told apart, but their sum is
  // the truth's at that size; compute keeps its modeled time.
  const CorrectionTable fitted(rows);
  int64_t calls = 0;
  for (const Op& op : ir.stages[0].ops) {
    const Correction c = fitted.find(CostKind::time, sim::op_facts(ir, op, 0));
    const OpTiming* u = nullptr;
    for (const OpTiming& t : uncorrected.result.ops)
      if (t.op == op.id) u = &t;
    if (op.collective() && op.collective()->kind == CollKind::all_reduce && ir.group_of(0, op).size() == 2 && u &&
        u->end_us > u->start_us) {
      const double net_us = u->end_us - u->start_us;
      CHECK(c.apply(net_us) == Approx(40.0 + 1.5 * net_us).epsilon(1e-3));
      ++calls;
    } else if (!is_comm(op.kind)) {
      CHECK(c.identity());
    }
  }
  CHECK(calls > 0);
  // Simulated with the fitted table, the step is the truth's.
  Scenario refit = plain;
  refit.topology.calibration.corrections = CorrectionTable(rows);
  CHECK(sim::simulate(build_step_ir(refit)).result.step_time_s == Approx(truth.result.step_time_s).epsilon(1e-3));
}

TEST_CASE("a simulated step's communication already starts at its last arrival", "[analysis][validate]") {
  Scenario s = test::scenario_from(cpu_scenario("cpu-host", 2, 2));
  s.topology.calibration.corrections = CorrectionTable({CorrectionRow{OpClass{CostKind::handoff}, Correction{150.0, 1.0}}});
  const StepIR ir = build_step_ir(s);
  sim::Simulation sim = sim::simulate(ir);
  REQUIRE(sim.result.ops.size() > 0);
  CHECK(align_comm_starts(sim.result, ir) == 0);
}

TEST_CASE("measured communication is timed from when its last participant arrived", "[analysis][validate]") {
  // TP 2 x PP 2: tensor-parallel collectives within a stage, pipeline transfers between stages.
  const StepIR ir = build_step_ir(test::scenario_from(cpu_scenario("cpu-host", 2, 2)));
  StepResult m;
  m.kind = "measured";
  for (int64_t rank = 0; rank < ir.layout.world(); ++rank) {
    const StepGraph& g = ir.graph_for(rank);
    for (const Op& op : g.ops) {
      // Rank r posts everything 10 r us late; compute lasts 5 us, communication until long after
      // every participant posted it (as it must: it cannot end before its last member arrives).
      const double start = 100.0 * op.id + 10.0 * static_cast<double>(rank);
      m.ops.push_back({rank, op.id, start, start + (is_comm(op.kind) ? 1e7 : 5.0)});
    }
    m.ranks.push_back({rank, g.stage, 0, 0, 0, {}});
  }
  StepResult aligned = m;
  const int64_t moved = align_comm_starts(aligned, ir);
  CHECK(moved > 0);
  std::map<std::pair<int64_t, OpId>, const OpTiming*> at;
  for (const OpTiming& t : aligned.ops) at[{t.rank, t.op}] = &t;
  int64_t coll = 0, p2p = 0;
  for (size_t i = 0; i < m.ops.size(); ++i) {
    const OpTiming& before = m.ops[i];
    const OpTiming& after = aligned.ops[i];
    const Op& op = ir.graph_for(before.rank).op(before.op);
    if (!is_comm(op.kind)) {
      CHECK(after.start_us == before.start_us);  // compute untouched
      continue;
    }
    CHECK(after.end_us == before.end_us);
    CHECK(after.start_us >= before.start_us);
    CHECK(after.start_us <= after.end_us);
    if (const auto* c = op.collective(); c && c->group == GroupKind::tp) {
      // Both members start when the later one (the larger rank) posted it.
      double latest = 0;
      for (int64_t r : ir.group_of(before.rank, op)) latest = std::max(latest, at.at({r, before.op})->start_us);
      CHECK(after.start_us == Approx(latest));
      CHECK(latest == Approx(100.0 * op.id + 10.0 * static_cast<double>(ir.group_of(before.rank, op).back())));
      ++coll;
    } else if (op.kind == OpKind::send || op.kind == OpKind::recv) {
      const int64_t peer = ir.peer_of(before.rank, op, op.kind == OpKind::send);
      // Send and its receive share one start: the later of the two posts.
      for (const OpTiming& t : aligned.ops) {
        if (t.rank != peer) continue;
        const Op& o = ir.graph_for(peer).op(t.op);
        if (o.p2p() && o.p2p()->tag == op.p2p()->tag && o.kind != op.kind) {
          INFO("rank " << before.rank << " " << op.full_name() << " tag " << op.p2p()->tag << " peer " << peer << " "
                       << o.full_name() << " before " << before.start_us);
          CHECK(t.start_us == Approx(after.start_us));
          ++p2p;
        }
      }
    }
  }
  CHECK(coll > 0);
  CHECK(p2p > 0);
}

TEST_CASE("the calibration cache is keyed by host, backend, ranks, scenario and version", "[analysis][validate]") {
  const Scenario a = test::scenario_from(cpu_scenario("cpu-host"));
  const Scenario b = test::scenario_from(cpu_scenario("cpu-host"), {"model.num_layers=2"});
  const auto pa = cached_calibration_path(a, "cpu"), pb = cached_calibration_path(b, "cpu");
  CHECK(pa != pb);
  CHECK(pa != cached_calibration_path(a, "cuda"));
  CHECK(pa.string().find("-np2-") != std::string::npos);
  CHECK(pa.parent_path().parent_path() == cache_dir() / "calibration");
  CHECK(pa.extension() == ".toml");
}
