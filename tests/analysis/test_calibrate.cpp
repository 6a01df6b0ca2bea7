// paralab tests — the calibrated topology: written from measurements, it loads as a topology,
// simulates, and the simulator takes the measured time of every op whose shape was measured;
// the fitted device and link values land in the documented keys. Validate's alignment of
// measured communication to the simulator's definition.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <random>

#include "analysis/calibrate.hpp"
#include "analysis/in_situ.hpp"
#include "analysis/lad_fit.hpp"
#include "analysis/measure.hpp"
#include "analysis/validate.hpp"
#include "ir/step_ir.hpp"
#include "ir/topology_loader.hpp"
#include "results/comm_alignment.hpp"
#include "results/result_io.hpp"
#include "sim/compute/compute_model.hpp"
#include "sim/simulate.hpp"
#include "../ir/test_util.hpp"
#include "calibrate_test_util.hpp"

using namespace paralab;
using namespace paralab::calib;
using namespace paralab::calib::testing;

TEST_CASE("a calibrated topology loads, simulates and takes the measured op times", "[analysis][calibrate]") {
  const StepIR base_ir = build_step_ir(test::scenario_from(cpu_scenario("cpu-host")));
  CalibrationResult r = synthetic_result(base_ir);
  // A scenario executed in situ: its steps go into the file for validate to hold its own
  // executions against (median, min, max).
  r.in_situ.step_s["cpu-tp2"] = {"af765c8ba317", {0.012, 0.010, 0.011}};

  // The fits found the synthetic parameters.
  REQUIRE(r.gemm.count(MathMode::f32));
  CHECK(r.gemm.at(MathMode::f32).flop_per_us == Approx(40e3).epsilon(0.05));
  REQUIRE(r.have_comm_fit);
  CHECK(r.comm_fit.launch_us == Approx(20).epsilon(0.02));
  CHECK(r.comm_fit.step_us == Approx(4).epsilon(0.02));
  CHECK(r.comm_fit.gbps() == Approx(3.0).epsilon(0.02));

  test::TempFile topo(topology_toml(r), "calibrated.toml");
  const Topology t = load_topology(topo.path());  // the simulator accepts it as it is
  CHECK(t.name == "cpu-host-calibrated");
  CHECK(t.device.kind == DeviceKind::cpu);
  CHECK(t.node.intra_link.bw_gbps == Approx(3.0).epsilon(0.02));
  CHECK(t.node.intra_link.lat_us == Approx(4.0).epsilon(0.02));
  CHECK(t.collectives.launch_lat_us == Approx(20.0).epsilon(0.02));
  CHECK(t.device.mem_bw_gbps == Approx(10.0));
  // A CPU host: the cores its ranks share and the executor's spin window (docs/simulator.md,
  // "Shared cores").
  CHECK(t.node.cores == 2);
  CHECK(t.collectives.poll_spin_us == exec::kPollSpinUs);
  // GEMM rate = peak x efficiency (docs/calibration.md).
  CHECK(t.device.peak(MathMode::f32) * t.device.gemm_max_efficiency * 1e6 == Approx(40e3).epsilon(0.05));
  CHECK_FALSE(t.calibration.source.empty());
  CHECK(t.calibration.gemm.size() + t.calibration.kernels.size() == r.compute.size());
  REQUIRE(t.calibration.executions.size() == 1);
  CHECK(t.calibration.executions[0].scenario == "cpu-tp2");
  CHECK(t.calibration.executions[0].digest == "af765c8ba317");
  CHECK(t.calibration.executions[0].executions == 3);
  CHECK(t.calibration.executions[0].step_median_s == Approx(0.011));
  CHECK(t.calibration.executions[0].step_min_s == Approx(0.010));
  CHECK(t.calibration.executions[0].step_max_s == Approx(0.012));
  CHECK(t.calibration.executions[0].step_fast_s == Approx(0.010));  // the fastest 2 of 3: their lower middle

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

// In situ (analysis/in_situ.hpp): a step simulated with known dispatch and hand-off gaps is
// read back as a measurement; the gaps are recovered exactly, every compute op is a sample at
// the compute model's duration, and a calibration carrying those samples writes the three
// parameters into the topology (which then simulates the same step).
TEST_CASE("in-situ samples recover the executor's gaps from a measured step", "[analysis][calibrate]") {
  Scenario s = test::scenario_from(cpu_scenario("cpu-host"));
  s.topology.device.dispatch_us = 4.0;
  s.topology.device.stream_handoff_us = 9.0;
  s.topology.device.compute_handoff_us = 3.0;
  s.topology.device.handoff_on_core_us = 0.0;  // every call posted 9 us after its wake-up
  s.topology.collectives.sync_skew_us = 0.0;
  const StepIR ir = build_step_ir(s);
  const sim::Simulation sim = sim::simulate(ir);

  InSituSamples in;
  collect_in_situ(ir, sim.result, "execution test", in);
  CHECK(in.executions == 1);
  REQUIRE(in.dispatch_us.size() > 50);
  REQUIRE(in.handoff_us.size() > 20);
  REQUIRE(in.compute_handoff_us.size() > 20);
  for (double g : in.dispatch_us) CHECK(g == Approx(4.0).margin(1e-6));
  for (double g : in.handoff_us) CHECK(g == Approx(9.0).margin(1e-6));
  for (double g : in.compute_handoff_us) CHECK(g == Approx(3.0).margin(1e-6));
  CHECK(trimmed_mean(in.dispatch_us, 0.02) == Approx(4.0));
  CHECK(trimmed_mean({1, 2, 3, 4, 1000}, 0.2) == Approx(3.0));  // drops one value each side
  CHECK(trimmed_mean({}, 0.02) == 0.0);
  // Compute samples: every compute op of rank 0, at its simulated duration.
  const sim::ComputeModel cm(ir.scenario.topology);
  size_t compute_ops = 0;
  for (const Op& op : ir.stages[0].ops) compute_ops += !is_comm(op.kind);
  size_t samples = 0;
  for (const auto& [k, x] : in.compute) {
    samples += x.us.size();
    CHECK(x.origin == "execution test");
  }
  CHECK(samples == compute_ops);
  // Communication: one sample per call over more than one rank (tp collectives here).
  CHECK_FALSE(in.comm.empty());
  for (const CommSample& c : in.comm) CHECK(c.group == 2);

  // Into the calibrated topology.
  const StepIR base_ir = build_step_ir(test::scenario_from(cpu_scenario("cpu-host")));
  CalibrationResult r = synthetic_result(base_ir);
  r.in_situ = in;
  r.in_situ.arrivals = {{0, 0, 10}, {10, 0, 10}, {0, 0, 10}, {10, 0, 10}};  // no time since: no drift
  CHECK(r.compute_tail == 0.0);  // replayed or swept points only: no tail measured
  CHECK(topology_toml(r).find("compute_tail = 0.0                 # from the base topology") != std::string::npos);
  // Two keys executed in situ (medians 10 and 100 us), in three executions whose compute took
  // 5 %, 10 % and 50 % more than the medians: the median execution's 10 %. A key that was not
  // executed (its point replayed) is not counted.
  REQUIRE(r.compute.size() >= 3);
  r.compute[0].origin = r.compute[1].origin = "execution test";
  r.compute[0].us = {10, 13, 10};
  r.compute[1].us = {100, 100, 100, 100};
  const OpKey k0 = r.compute[0].key, k1 = r.compute[1].key, k2 = r.compute[2].key;
  r.in_situ.compute_by_execution = {{{k0, {22, 2}}, {k1, {209, 2}}},
                                    {{k0, {30, 2}}, {k1, {300, 2}}, {k2, {1000, 1}}},
                                    {{k0, {22, 2}}, {k1, {220, 2}}}};
  fit_all(r);
  CHECK(r.compute_tail == Approx(0.1));
  CHECK(r.compute_tail_executions == 3);
  CHECK(r.compute_tail_samples == 12);
  CHECK(r.drift.rate == 0.0);
  CHECK(r.sync_drift() == 0.0);
  CHECK(r.dispatch_us == Approx(4.0));
  CHECK(r.stream_handoff_us == Approx(9.0));
  CHECK(r.compute_handoff_us == Approx(3.0));
  CHECK(r.handoff_on_core_us == Approx(9.0));  // the median hand-off
  CHECK(r.sync_skew_us == Approx(5.0));
  REQUIRE(r.have_in_situ_comm());
  test::TempFile topo(topology_toml(r), "calibrated-in-situ.toml");
  const Topology t = load_topology(topo.path());
  CHECK(t.device.dispatch_us == Approx(4.0));
  CHECK(t.device.stream_handoff_us == Approx(9.0));
  CHECK(t.device.compute_handoff_us == Approx(3.0));
  CHECK(t.device.handoff_on_core_us == Approx(9.0));
  CHECK(t.device.compute_tail == Approx(0.1));
  CHECK(t.collectives.sync_skew_us == Approx(5.0));
  CHECK(t.collectives.launch_lat_us == Approx(r.comm_fit.launch_us + r.comm_in_situ_extra_us).epsilon(1e-5));

  // Three executions whose members waited 2, 4 and 60 us on average (pooled: 22 us): the skew
  // is the median execution's, 4 us.
  r.in_situ.arrivals = {{0, 0, 10, 0, 0}, {4, 0, 10, 0, 0}, {4, 0, 10, 0, 1},
                        {4, 0, 10, 0, 1}, {120, 0, 10, 0, 2}, {0, 0, 10, 0, 2}};
  fit_all(r);
  CHECK(r.sync_skew_us == Approx(4.0));
  CHECK(r.sync_skew_executions == 3);
  const std::string toml = topology_toml(r);
  CHECK(toml.find("the median over 3 executions of each one's mean wait") != std::string::npos);
  CHECK(toml.find("6 samples (pooled mean 22 us") != std::string::npos);
  size_t n = 0;
  CHECK(median_execution_wait({}, 0.0, &n) == 0.0);
  CHECK(n == 0);
  CHECK(median_execution_wait({{3, 0, 0, 0, 7}}, 0.0, &n) == Approx(3.0));
  CHECK(n == 1);
}

// CollectiveSpec::p2p_ack_us: the simulator ends every send exactly that long after its
// receive (and together without it); a step simulated so reads back, in situ, as that
// acknowledgement delay, which lands in the calibrated topology; sends are then no samples of
// the per-call communication time (their end is the acknowledgement's).
TEST_CASE("a send ends p2p_ack_us after its receive, and in situ reads the delay back", "[analysis][calibrate]") {
  for (double ack : {0.0, 250.0}) {
    Scenario s = test::scenario_from(cpu_scenario("cpu-host", 1, 2));
    s.topology.collectives.p2p_ack_us = ack;
    s.topology.collectives.sync_skew_us = 0.0;
    const StepIR ir = build_step_ir(s);
    const sim::Simulation sim = sim::simulate(ir);
    const std::vector<size_t> partner = transfer_partners(sim.result, ir);
    int64_t sends = 0, recvs = 0;
    for (size_t i = 0; i < sim.result.ops.size(); ++i) {
      const OpTiming& t = sim.result.ops[i];
      const OpKind k = ir.graph_for(t.rank).op(t.op).kind;
      if (k == OpKind::recv) ++recvs;
      if (k != OpKind::send) continue;
      ++sends;
      REQUIRE(partner[i] != SIZE_MAX);
      CHECK(partner[partner[i]] == i);
      CHECK(t.end_us - sim.result.ops[partner[i]].end_us == Approx(ack).margin(1e-6));
    }
    CHECK(sends == 8);  // 4 micro-batches: stage 0 sends each activation, stage 1 each gradient
    CHECK(recvs == sends);

    InSituSamples in;
    collect_in_situ(ir, sim.result, "execution test", in);
    REQUIRE(in.acks.size() == static_cast<size_t>(sends));
    for (const InSituSamples::Ack& a : in.acks) {
      CHECK(a.ack_us == Approx(ack).margin(1e-6));
      CHECK(a.sender_wait_us >= 0.0);  // from the send's start (the transfer's, simulated) to the data's arrival
      CHECK(a.sender_wait_us < 500.0);
    }
    // One communication sample per receive and per collective over more than one rank.
    size_t calls = 0;
    for (const OpTiming& t : sim.result.ops) {
      const Op& op = ir.graph_for(t.rank).op(t.op);
      if (op.kind == OpKind::recv || (op.kind == OpKind::collective && ir.group_of(t.rank, op).size() > 1 && op.collective()->bytes > 0))
        ++calls;
    }
    CHECK(in.comm.size() == calls);
    // Each call with its rank's wait for its last participant: none in the simulated step
    // (it reports a call from when its sides met); 100 us for receives posted that early.
    for (const CommSample& c : in.comm) CHECK(c.waited_us == 0.0);
    StepResult early = sim.result;
    for (OpTiming& t : early.ops)
      if (ir.graph_for(t.rank).op(t.op).kind == OpKind::recv) t.start_us -= 100.0;
    InSituSamples waited;
    collect_in_situ(ir, early, "execution test", waited);
    REQUIRE(waited.comm.size() == in.comm.size());
    for (const CommSample& c : waited.comm) CHECK(c.waited_us == Approx(c.pattern == CommPattern::send_recv ? 100.0 : 0.0).margin(1e-9));
    if (ack == 0.0) continue;

    CalibrationResult r = synthetic_result(build_step_ir(test::scenario_from(cpu_scenario("cpu-host"))));
    r.in_situ = in;
    fit_all(r);
    CHECK(r.p2p_ack_us == Approx(ack));
    test::TempFile topo(topology_toml(r), "calibrated-ack.toml");
    CHECK(load_topology(topo.path()).collectives.p2p_ack_us == Approx(ack));
  }
}

// The acknowledgement is the mean over the transfers whose sender had waited at most the spin
// window when the data arrived (a sleeping sender's poller adds wake_us in the simulator), when
// at least kMinAwakeAcks of them did; otherwise, or with no spin window, over all.
TEST_CASE("p2p_ack_us is read from the transfers whose sender's poller still spun", "[analysis][calibrate]") {
  std::vector<InSituSamples::Ack> acks;
  for (int i = 0; i < 30; ++i) acks.push_back({20.0 + (i % 3), 100.0 + i});  // awake: 20-22 us
  for (int i = 0; i < 10; ++i) acks.push_back({150.0, 800.0 + i});            // slept 0.8 ms
  CHECK(awake_acks(acks, 500.0, 20).size() == 30);
  CHECK(trimmed_mean(awake_acks(acks, 500.0, 20), 0.0) == Approx(21.0));
  CHECK(awake_acks(acks, 500.0, 31).size() == 40);  // too few awake: all
  CHECK(awake_acks(acks, 0.0, 20).size() == 40);    // no spin window: nothing sleeps

  CalibrationResult r = synthetic_result(build_step_ir(test::scenario_from(cpu_scenario("cpu-host"))));
  r.in_situ.acks = acks;
  fit_all(r);
  CHECK(r.p2p_ack_us == Approx(21.0));
  const std::string toml = topology_toml(r);
  CHECK(toml.find("where the sender's poller still spun (of 40 transfers), 30 samples") != std::string::npos);
  test::TempFile topo(toml, "calibrated-awake-ack.toml");
  CHECK(load_topology(topo.path()).collectives.p2p_ack_us == Approx(21.0));
}

// CollectiveSpec::sync_drift, read back: a step simulated with a drift waits, before each
// collective within the stage, drift x (its release - the last time compute waited for a
// call), so in situ's time since that wait is (start - release) x (1 + drift) / drift for
// every member. Waits in proportion to those times fit that proportion (a ratio of sums), and
// the calibrated topology carries it with no constant skew.

TEST_CASE("a simulated step's communication already starts at its last arrival", "[analysis][validate]") {
  Scenario s = test::scenario_from(cpu_scenario("cpu-host", 2, 2));
  s.topology.collectives.sync_skew_us = 150.0;  // within-stage calls wait for a late member
  s.topology.collectives.p2p_ack_us = 40.0;     // sends end after their receives
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
