// paralab tests — the in-situ samples: what a measured step of the executor adds to the
// calibration (dispatch and hand-off gaps, the arrival skew's drift, sleeping pollers, the
// per-call costs and the bytes' slow-down), read back from synthetic steps with known values.
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
#include "sim/engine/core_share.hpp"
#include "sim/simulate.hpp"
#include "../ir/test_util.hpp"
#include "calibrate_test_util.hpp"

using namespace paralab;
using namespace paralab::calib;
using namespace paralab::calib::testing;

TEST_CASE("in situ, the arrival skew's drift is read from the time since compute last waited", "[analysis][calibrate]") {
  constexpr double kDrift = 0.25;
  Scenario s = test::scenario_from(cpu_scenario("cpu-host"));
  s.topology.device.dispatch_us = s.topology.device.stream_handoff_us = 0.0;
  s.topology.collectives.sync_skew_us = 0.0;
  s.topology.collectives.sync_drift = kDrift;
  const StepIR ir = build_step_ir(s);
  const sim::Simulation sim = sim::simulate(ir);
  InSituSamples in;
  collect_in_situ(ir, sim.result, "execution test", in);

  std::map<std::pair<int64_t, OpId>, const OpTiming*> at;
  for (const OpTiming& t : sim.result.ops) at[{t.rank, t.op}] = &t;
  size_t i = 0, synced = 0;
  for (const OpTiming& t : sim.result.ops) {
    const StepGraph& g = ir.graph_for(t.rank);
    const Op& op = g.op(t.op);
    const bool in_stage = op.kind == OpKind::sendrecv || (op.collective() && within_stage(op.collective()->group));
    if (!in_stage || ir.group_of(t.rank, op).size() < 2) continue;
    double release = 0;  // the end of the last constraint: its dependencies and its stream predecessor
    for (OpId d : op.deps) release = std::max(release, at.at({t.rank, d})->end_us);
    const auto& stream = g.streams[static_cast<size_t>(op.stream)];
    const auto pos = std::find(stream.begin(), stream.end(), op.id);
    if (pos != stream.begin()) release = std::max(release, at.at({t.rank, *std::prev(pos)})->end_us);
    REQUIRE(i < in.arrivals.size());
    CAPTURE(t.rank, op.full_name());
    const Arrival& a = in.arrivals[i];
    CHECK(a.since_us == Approx((t.start_us - release) * (1 + kDrift) / kDrift).margin(1e-6));
    CHECK(a.wait_us == 0.0);  // a simulated stage's members arrive together
    CHECK(a.spread_us == 0.0);
    synced += a.since_us < t.start_us - 1e-6;  // some compute waited for a call before it
    ++i;
  }
  CHECK(i == in.arrivals.size());
  CHECK(i > 10);
  CHECK(synced > 0);
  // Each arrival is tagged with the execution it came from: a second step's are execution 1.
  for (const Arrival& a : in.arrivals) CHECK(a.execution == 0);
  collect_in_situ(ir, sim.result, "execution test", in);
  REQUIRE(in.arrivals.size() == 2 * i);
  for (size_t k = i; k < in.arrivals.size(); ++k) CHECK(in.arrivals[k].execution == 1);
  // The rate is a ratio of sums, without the largest waits; it is used where it tells the
  // calls with a sleeping member (spread > 500 us) better than no drift does.
  const std::vector<Arrival> three = {{1, 10, 0}, {2, 20, 0}, {1000, 30, 0}};
  CHECK(fit_drift({{1, 10, 0}, {2, 20, 0}, {3, 30, 0}}, 500, 0.0).rate == Approx(0.1));
  CHECK(fit_drift(three, 500, 0.34).rate == Approx(0.1));  // the largest wait dropped
  CHECK(fit_drift({{0, 0, 0}, {0, 0, 0}}, 500, 0.0).rate == 0.0);
  CHECK(fit_drift({}, 500, 0.0).rate == 0.0);
  // Rate 0.05: 2 x 0.05 x since > 500 us from since 5 ms.
  const std::vector<Arrival> told = {{0, 1000, 100}, {100, 1000, 100}, {0, 9000, 1800}, {900, 9000, 1800}};
  const DriftFit good = fit_drift(told, 500, 0.0);
  CHECK(good.rate == Approx(0.05));
  CHECK(good.right == Approx(1.0));
  CHECK(good.right_twice == Approx(1.0));
  CHECK(good.right_awake == Approx(0.5));
  CHECK(good.spread == Approx(500.0 / 5000.0));
  CHECK(good.use());
  // The same waits, but the long one after a short time: the drift tells no better than none.
  const std::vector<Arrival> untold = {{0, 9000, 100}, {100, 9000, 100}, {0, 1000, 1800}, {900, 1000, 1800}};
  const DriftFit bad = fit_drift(untold, 500, 0.0);
  CHECK(bad.rate == Approx(0.05));
  CHECK(bad.right == Approx(bad.right_awake));  // no threshold does better than none asleep
  CHECK(bad.spread == 0.0);
  CHECK_FALSE(bad.use());
  // Members weigh 1 / their call's time: two 400 us calls with a sleeper told right by the
  // drift, one 100 us awake call put to sleep by it, one 100 us call left awake.
  std::vector<Arrival> mixed = {{0, 9000, 900, 400}, {900, 9000, 900, 400}, {0, 9000, 900, 400}, {900, 9000, 900, 400},
                                {0, 9000, 0, 100},   {0, 9000, 0, 100},     {0, 1000, 0, 100},   {0, 1000, 0, 100}};
  const DriftFit weighed = fit_drift(mixed, 500, 0.0);
  CHECK(weighed.rate == Approx(1800.0 / 56000.0));
  CHECK(weighed.right_twice == Approx(0.6));  // (4/400 + 2/100) / (4/400 + 4/100)
  CHECK(weighed.right_awake == Approx(0.8));  // (4/100) / (4/400 + 4/100)
  CHECK(weighed.right == Approx(0.8));        // no threshold beats "none asleep"
  CHECK(weighed.spread == 0.0);
  CHECK_FALSE(weighed.use());
  for (Arrival& a : mixed) a.time_us = 0;  // unknown times weigh alike: 6 of 8 right, 4 of 8 awake
  const DriftFit alike = fit_drift(mixed, 500, 0.0);
  CHECK(alike.right == Approx(0.75));
  CHECK(alike.right_awake == Approx(0.5));
  CHECK(alike.spread == Approx(500.0 / 5000.0));  // asleep from 5 ms since: between 1 and 9 ms
  CHECK(alike.use());
  CHECK_FALSE(fit_drift(told, 0.0, 0.0).use());  // no spin window (a GPU): never
  CHECK_FALSE(DriftFit{0.1, 1.0, 0.97, 0.2}.use());  // better by a hair: not worth moving every wait
  CHECK(DriftFit{0.1, 0.9, 0.8, 0.2}.use());
  CHECK_FALSE(DriftFit{0.1, 0.9, 0.8, 0.0}.use());  // no threshold found
  // Rank 1 posting every tensor-parallel collective 700 us early: it waits 700 us, rank 0 none,
  // and both members' calls spread over 700 us (the early one's poller slept).
  // (The simulator reports the stage's representative, rank 0: rank 1 runs the same ops.)
  StepResult early = sim.result;
  REQUIRE(std::all_of(early.ops.begin(), early.ops.end(), [](const OpTiming& t) { return t.rank == 0; }));
  for (const OpTiming& t : sim.result.ops) early.ops.push_back({1, t.op, t.start_us, t.end_us});
  for (OpTiming& t : early.ops)
    if (const auto* c = ir.graph_for(t.rank).op(t.op).collective(); c && c->group == GroupKind::tp && t.rank == 1) t.start_us -= 700.0;
  InSituSamples spread;
  collect_in_situ(ir, early, "execution test", spread);
  size_t tp_calls = 0, spread_calls = 0, waited_calls = 0;
  for (const Op& op : ir.stages[0].ops)
    if (const auto* c = op.collective(); c && c->group == GroupKind::tp && c->bytes > 0) ++tp_calls;
  for (const CommSample& c : spread.comm) {
    CHECK((c.spread_us == Approx(700.0) || c.spread_us == Approx(0.0).margin(1e-9)));
    spread_calls += c.spread_us > 1.0;
    waited_calls += c.waited_us > 1.0;
    CHECK(c.waited_us <= c.spread_us + 1e-9);
  }
  CHECK(tp_calls > 10);
  CHECK(spread_calls == 2 * tp_calls);  // both members of each
  CHECK(waited_calls == tp_calls);      // rank 1's

  const StepIR base_ir = build_step_ir(test::scenario_from(cpu_scenario("cpu-host")));
  CalibrationResult r = synthetic_result(base_ir);
  r.in_situ = in;
  // Waits in proportion to the times since, and spreads of twice the wait: the drift tells every
  // sleeper (some spreads exceed the window, some not).
  std::vector<double> since;
  for (const Arrival& a : r.in_situ.arrivals) since.push_back(a.since_us);
  std::sort(since.begin(), since.end());
  const double rate = 0.25 * exec::kPollSpinUs / since[since.size() / 2];  // members beyond the median time sleep
  size_t asleep = 0;
  for (Arrival& a : r.in_situ.arrivals) {
    a.wait_us = rate * a.since_us;
    a.spread_us = 2 * a.wait_us;
    a.time_us = 100;  // calls of one time weigh alike (the weighting has its own checks above)
    asleep += a.spread_us > exec::kPollSpinUs;
  }
  REQUIRE(asleep > 0);
  REQUIRE(asleep < r.in_situ.arrivals.size());
  fit_all(r);
  CHECK(r.drift.right == Approx(1.0));
  CHECK(r.sync_drift() == Approx(rate));
  CHECK(r.sync_skew_us == 0.0);
  // The fitted spread tells every member as twice the rate does (here the spread is twice the wait).
  for (const Arrival& a : r.in_situ.arrivals) CHECK((r.spread_drift() * a.since_us > exec::kPollSpinUs) == (a.spread_us > exec::kPollSpinUs));
  test::TempFile topo(topology_toml(r), "calibrated-drift.toml");
  const Topology t = load_topology(topo.path());
  CHECK(t.collectives.sync_drift == Approx(rate).epsilon(1e-5));
  CHECK(t.collectives.spread_drift == Approx(r.spread_drift()).epsilon(1e-5));
  CHECK(t.collectives.sync_skew_us == 0.0);
}

// CollectiveSpec::wake_us: executed calls that ended after a poller's spin window set the wake
// time, the others the per-call extra; with too few of either kind all of them set the extra
// alone. Which poller counts mirrors the simulator: with the drift used (the simulator then
// sleeps a call's earliest member), the call's spread (its first member's wait for the last)
// plus the fitted call time beyond exec::kPollSpinUs, so a last member that waited for no one
// is asleep with its call; without it, the member's own wait.
TEST_CASE("in situ, calls ending after the spin window set wake_us, the others the per-call extra", "[analysis][calibrate]") {
  const StepIR base_ir = build_step_ir(test::scenario_from(cpu_scenario("cpu-host")));
  // Arrivals the drift tells (fit_drift's test): it is used.
  const std::vector<Arrival> drifting = {{0, 1000, 100}, {100, 1000, 100}, {0, 9000, 1800}, {900, 9000, 1800}};
  for (const bool drift : {true, false})
    for (const int asleep : {25, 5}) {
      CalibrationResult r = synthetic_result(base_ir);
      if (drift) r.in_situ.arrivals = drifting;
      const double fit = r.comm_fit.predict_us(CommPattern::send_recv, 2, 16384);
      const double long_wait = exec::kPollSpinUs + 100.0;
      for (int i = 0; i < 30; ++i) r.in_situ.comm.push_back({CommPattern::send_recv, 2, 16384, fit + i, 1, 0.0, 0.0});
      for (int i = 0; i < asleep; ++i) {
        CommSample c{CommPattern::send_recv, 2, 16384, fit + 314.5 + 20.0 * (i % 3 - 1), 1, 0.0, 0.0};
        c.spread_us = long_wait;             // the call's first member waited
        if (!drift) c.waited_us = long_wait;  // ... and, without the drift, so did this one
        r.in_situ.comm.push_back(c);
      }
      fit_all(r);
      CAPTURE(drift, asleep);
      CHECK(r.drift.use() == drift);
      REQUIRE(r.have_in_situ_comm());
      test::TempFile topo(topology_toml(r), "calibrated-wake.toml");
      const Topology t = load_topology(topo.path());
      // Awake calls 0..29 us beyond the fit: their weighted median is below the plain 14.5
      // (the shorter calls weigh more); the sleepers' 294.5 / 314.5 / 334.5 us likewise.
      const double awake_extra = weighted_extra(range_us(0, 30), fit);
      CHECK(awake_extra < 14.5);
      CHECK(awake_extra >= 10.0);
      CHECK(r.comm_in_situ_bytes_slowdown == 0.0);  // one size of call: nothing to split
      if (asleep >= 20) {
        CHECK(r.in_situ_awake_calls == 30);
        CHECK(r.in_situ_asleep_calls == 25);
        CHECK(r.comm_in_situ_extra_us == Approx(awake_extra));
        CHECK(r.wake_us == Approx(314.5 - awake_extra));
        CHECK(t.collectives.wake_us == Approx(314.5 - awake_extra));
      } else {
        std::vector<double> all = range_us(0, 30);
        for (int i = 0; i < asleep; ++i) all.push_back(314.5 + 20.0 * (i % 3 - 1));
        CHECK(r.in_situ_asleep_calls == 0);
        CHECK(r.wake_us == 0.0);
        CHECK(r.comm_in_situ_extra_us == Approx(weighted_extra(all, fit)));  // all 35 alike
        CHECK(t.collectives.wake_us == 0.0);
      }
      CHECK(t.collectives.launch_lat_us == Approx(r.comm_fit.launch_us + r.comm_in_situ_extra_us).epsilon(1e-5));
    }
  // Without the drift, last members of spread calls (no wait of their own) are awake.
  CalibrationResult r = synthetic_result(base_ir);
  const double fit = r.comm_fit.predict_us(CommPattern::send_recv, 2, 16384);
  for (int i = 0; i < 30; ++i) r.in_situ.comm.push_back({CommPattern::send_recv, 2, 16384, fit + i, 1, 0.0, 0.0});
  for (int i = 0; i < 25; ++i) r.in_situ.comm.push_back({CommPattern::send_recv, 2, 16384, fit + 314.5, 1, 0.0, exec::kPollSpinUs + 100.0});
  fit_all(r);
  CHECK_FALSE(r.drift.use());
  CHECK(r.in_situ_asleep_calls == 0);
  CHECK(r.in_situ_awake_calls == 55);
}

// The executed step's calls move their bytes slower than the sweep's warm, reused buffers:
// over calls of several sizes, the per-call cost and that slow-down are fitted together
// (lad_fit.hpp), and the calibrated topology carries the slow-down as intra_efficiency (the
// reductions' rate with it). A constant alone would over-predict the small calls and
// under-predict the large ones.
TEST_CASE("in situ, calls of several sizes set the per-call cost and the bytes' slow-down", "[analysis][calibrate]") {
  const StepIR base_ir = build_step_ir(test::scenario_from(cpu_scenario("cpu-host")));
  CalibrationResult r = synthetic_result(base_ir);
  // The sweep's reduce-scatters also combine their bytes at 6 GB/s (its all-reduces do not:
  // the fit lands between), to see that rate scaled too.
  for (int64_t bytes = 256; bytes <= (int64_t{1} << 20); bytes *= 16) {
    const double b = static_cast<double>(bytes);
    r.comm.push_back({CommPattern::reduce_scatter, DType::f32, 2, bytes,
                      {20.0 + 4.0 + comm_wire_bytes(CommPattern::reduce_scatter, 2, b) / 3e3 +
                       comm_reduced_bytes(CommPattern::reduce_scatter, 2, b) / 6e3},
                      0});
  }
  fit_all(r);
  REQUIRE(r.comm_fit.reduce_gbps() > 0.0);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < 400; ++i)
    for (CommPattern p : {CommPattern::all_gather, CommPattern::reduce_scatter}) {
      const double bytes = std::pow(2.0, 10 + i % 11);  // 1 KB .. 1 MB
      const double fit = r.comm_fit.predict_us(p, 2, bytes);
      double t = fit + 25.0 + 1.5 * r.comm_fit.bytes_us(p, 2, bytes);
      t *= 1.0 + 0.08 * (2 * u(rng) - 1);
      if (i % 9 == 0) t += 3000.0 * u(rng);  // a descheduled rank now and then
      r.in_situ.comm.push_back({p, 2, bytes, t, 1, 0.0, 0.0});
    }
  fit_all(r);  // the sweep's fit again, and the in-situ split
  REQUIRE(r.have_in_situ_comm());
  const double c = r.comm_in_situ_bytes_slowdown;
  CHECK(c == Approx(1.5).epsilon(0.1));
  CHECK(r.comm_in_situ_extra_us == Approx(25.0).epsilon(0.15));
  test::TempFile topo(topology_toml(r), "calibrated-slowdown.toml");
  const Topology t = load_topology(topo.path());
  CHECK(t.node.intra_link.efficiency == Approx(1.0 / (1.0 + c)).epsilon(1e-5));
  CHECK(t.node.intra_link.effective_bw_gbps() == Approx(r.comm_fit.gbps() / (1.0 + c)).epsilon(1e-5));
  CHECK(t.collectives.reduce_gbps == Approx(r.comm_fit.reduce_gbps() / (1.0 + c)).epsilon(1e-5));
  CHECK(t.collectives.launch_lat_us == Approx(r.comm_fit.launch_us + r.comm_in_situ_extra_us).epsilon(1e-5));
}

// An executed call's samples are taken together first (their median), as the per-op
// comparison takes an op's runs: 30 calls each executed 3 times, once fast (5 us beyond the
// fit) and twice waiting for a core (150 us). Pooled, the 1 / time weights would pick 5 us;
// per call, each is a 150 us call, as its measured reference will be.
TEST_CASE("in situ, a call's executions count once, by their median", "[analysis][calibrate]") {
  const StepIR base_ir = build_step_ir(test::scenario_from(cpu_scenario("cpu-host")));
  CalibrationResult r = synthetic_result(base_ir);
  const double fit = r.comm_fit.predict_us(CommPattern::all_gather, 2, 16384);
  for (int exec = 0; exec < 3; ++exec)
    for (int call = 0; call < 30; ++call) {
      CommSample c{CommPattern::all_gather, 2, 16384, fit + (exec == 0 ? 5.0 : 150.0), 1, 0.0, 0.0};
      c.rank = call % 2;
      c.op = call / 2;
      r.in_situ.comm.push_back(c);
    }
  fit_all(r);
  CHECK(r.in_situ_awake_calls == 30);
  CHECK(r.comm_in_situ_extra_us == Approx(150.0));
  // The same samples without their calls: pooled, the fast ones win.
  for (CommSample& c : r.in_situ.comm) c.op = -1;
  fit_all(r);
  CHECK(r.in_situ_awake_calls == 90);
  CHECK(r.comm_in_situ_extra_us == Approx(5.0));
}

// Shared cores (in_situ.hpp, `turns`): 4 ranks of one stage on 2 cores take 2 turns in the
// simulator's pool, which waits one op's time before each compute op by itself. A step simulated
// so, with known gaps, is read back net of that wait: the gaps exactly; read as if each rank
// had its own core, every compute-side gap is the known one plus the op's time. The fit then
// takes the dispatch gap's mean, not its median (its tail is the turn queue), where turns > 1.
TEST_CASE("in situ, gaps before compute ops are net of the core pool's turns", "[analysis][calibrate]") {
  CHECK(sim::CoreShare::turns_of(4, 2) == 2.0);
  CHECK(sim::CoreShare::turns_of(3, 2) == 1.5);
  CHECK(sim::CoreShare::turns_of(2, 2) == 1.0);
  CHECK(sim::CoreShare::turns_of(4, 0) == 1.0);  // no cores given: each rank its own

  Scenario s = test::scenario_from(cpu_scenario("cpu-host", 4));
  s.topology.node.cores = 2;
  s.topology.device.dispatch_us = 4.0;
  s.topology.device.stream_handoff_us = 9.0;
  s.topology.device.compute_handoff_us = 3.0;
  s.topology.device.handoff_on_core_us = 0.0;
  s.topology.collectives.sync_skew_us = 0.0;
  s.topology.collectives.poll_spin_us = 0.0;  // no poller claims a core: compute never queues
  const StepIR ir = build_step_ir(s);
  REQUIRE(sim::CoreShare(ir).mode() == sim::CoreShare::Mode::node_cores);
  const sim::Simulation sim = sim::simulate(ir);

  InSituSamples net, raw;
  collect_in_situ(ir, sim.result, "execution test", net, sim::CoreShare::turns_of(4, 2));
  collect_in_situ(ir, sim.result, "execution test", raw);
  REQUIRE(net.dispatch_us.size() > 50);
  REQUIRE(net.compute_handoff_us.size() > 10);
  for (double g : net.dispatch_us) CHECK(g == Approx(4.0).margin(1e-6));
  for (double g : net.compute_handoff_us) CHECK(g == Approx(3.0).margin(1e-6));
  for (double g : net.handoff_us) CHECK(g == Approx(9.0).margin(1e-6));  // a call's worker: no turns
  REQUIRE(raw.dispatch_us.size() == net.dispatch_us.size());
  double op_us = 0;
  for (size_t i = 0; i < raw.dispatch_us.size(); ++i) {
    CHECK(raw.dispatch_us[i] > 4.0);  // plus the op's own time
    op_us += raw.dispatch_us[i] - net.dispatch_us[i];
  }
  CHECK(op_us > 0.0);
  CHECK_THROWS_AS(collect_in_situ(ir, sim.result, "execution test", raw, 0.5), InternalError);

  CHECK(net.turns == 2.0);
  CHECK(raw.turns == 1.0);

  // The fit: with turns the trimmed mean of the net gaps (never below 0), else the median.
  const StepIR base_ir = build_step_ir(test::scenario_from(cpu_scenario("cpu-host")));
  CalibrationResult r = synthetic_result(base_ir);
  r.in_situ.dispatch_us = {-6, 10, 10, 12, 94};
  r.in_situ.compute_handoff_us = {-8, -2, 1};
  r.in_situ.turns = 1.0;  // each rank its core, or stages that each fit the cores
  fit_all(r);
  CHECK(r.dispatch_us == Approx(10.0));
  CHECK(r.compute_handoff_us == 0.0);
  CHECK(topology_toml(r).find("in situ: median gap after a compute op") != std::string::npos);
  r.in_situ.turns = 2.0;
  fit_all(r);
  CHECK(r.dispatch_us == Approx(24.0));
  CHECK(topology_toml(r).find("mean gap after a compute op less the core pool's turns") != std::string::npos);
}

// finalize aligns only measured results (results/step_result.cpp): a simulated step starts
// every call when its members have arrived, waits included, so alignment moves nothing.

// The dispatch gap by the node's computing ranks (Calibration::dispatch): a 4-stage pipeline
// on 2 cores simulated with a known gap per number of computing ranks, pollers holding no core
// (poll_spin_us 0). Read back by the ranks computing as each gap began: with at most as many
// computing ranks as cores an op rarely waits for a core, so the gaps are the table's (all but
// a few: a third rank that starts computing within the gap and takes the core, or another that
// stops at the very instant the gap begins, which the engine still counts); beyond that they
// hold the pool's wait too, at least the table's. The fit takes each count's mean where the
// host's ranks outnumber its cores and two counts have 30 gaps or more.
TEST_CASE("in situ, dispatch gaps are binned by the node's computing ranks", "[analysis][calibrate]") {
  Scenario s = test::scenario_from(cpu_scenario("cpu-host", 1, 4));
  s.topology.node.cores = 2;
  s.topology.device.dispatch_us = 999.0;  // not used while the table is given
  s.topology.device.stream_handoff_us = 9.0;
  s.topology.device.compute_handoff_us = 3.0;
  s.topology.collectives.sync_skew_us = 0.0;
  s.topology.collectives.poll_spin_us = 0.0;
  const std::map<int64_t, double> gap = {{1, 10.0}, {2, 30.0}, {3, 50.0}, {4, 70.0}};
  for (const auto& [n, us] : gap) s.topology.calibration.dispatch.push_back({n, us});
  const StepIR ir = build_step_ir(s);
  REQUIRE(sim::CoreShare(ir).mode() == sim::CoreShare::Mode::node_cores);
  const sim::Simulation sim = sim::simulate(ir);

  InSituSamples in;
  collect_in_situ(ir, sim.result, "execution test", in);
  size_t binned = 0, few = 0, exact = 0;
  for (const auto& [n, v] : in.dispatch_by_busy_us) {
    REQUIRE(gap.count(n));
    binned += v.size();
    for (double g : v) {
      if (n > 2) {
        CHECK(g >= gap.at(n) - 1e-6);
        continue;
      }
      ++few;
      if (std::abs(g - gap.at(n)) < 1e-6) ++exact;
    }
    if (n <= 2) CHECK(quantile(v, 0.5) == Approx(gap.at(n)).margin(1e-6));
  }
  CHECK(static_cast<double>(exact) >= 0.95 * static_cast<double>(few));
  CHECK(binned == in.dispatch_us.size());
  REQUIRE(in.dispatch_by_busy_us.count(1));
  REQUIRE(in.dispatch_by_busy_us.count(2));
  CHECK(in.dispatch_us.size() > 100);

  // The fit: a mean per count with enough gaps, only where the ranks outnumber the cores.
  CalibrationResult r = synthetic_result(ir);
  r.in_situ.dispatch_by_busy_us = {{1, std::vector<double>(40, 10.0)}, {2, range_us(20.0, 41)}, {3, {50.0, 60.0}}};
  r.ranks = 4;
  r.host.cores = 2;
  fit_all(r);
  REQUIRE(r.dispatch_by_busy.size() == 2);  // 3 has too few gaps
  CHECK(r.dispatch_by_busy[0].busy_ranks == 1);
  CHECK(r.dispatch_by_busy[0].dispatch_us == Approx(10.0));
  CHECK(r.dispatch_by_busy[1].busy_ranks == 2);
  CHECK(r.dispatch_by_busy[1].dispatch_us == Approx(40.0));
  r.host.cores = 4;  // a core per rank: no turns, no table
  fit_all(r);
  CHECK(r.dispatch_by_busy.empty());
  r.host.cores = 2;
  r.in_situ.dispatch_by_busy_us.erase(2);  // one count: dispatch_us says it all
  fit_all(r);
  CHECK(r.dispatch_by_busy.empty());
}
