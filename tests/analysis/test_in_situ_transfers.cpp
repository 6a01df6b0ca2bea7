// paralab tests — the in-situ per-call cost of pipeline transfers against collectives': each
// kind sets its own once 20 of each were seen awake; a few transfers beside many collectives take
// the sweep's L alone; too few of both share one cost (analysis/calibration_fit.cpp).
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "analysis/calibrate.hpp"
#include "analysis/in_situ.hpp"
#include "analysis/lad_fit.hpp"
#include "exec/comm.hpp"
#include "ir/step_ir.hpp"
#include "ir/topology_loader.hpp"
#include "../ir/test_util.hpp"
#include "calibrate_test_util.hpp"

using namespace paralab;
using namespace paralab::calib;
using namespace paralab::calib::testing;

// Transfers and collectives set their own per-call extras once 20 of each were seen awake
// (a collective's ring needs every member's thread, a transfer its receiver's); with fewer,
// both are the median over all, and the file leaves p2p_launch_lat_us out (launch's then).
TEST_CASE("in situ, transfers and collectives each set their own per-call extra", "[analysis][calibrate]") {
  const StepIR base_ir = build_step_ir(test::scenario_from(cpu_scenario("cpu-host")));
  // {collectives, transfers ending after their spin window}: 5 such are too few for a wake
  // time, so they join the awake ones (listed first, so their order in the samples matters).
  for (const auto& [collectives, asleep] : {std::pair{30, 0}, std::pair{10, 0}, std::pair{30, 5}}) {
    CalibrationResult r = synthetic_result(base_ir);
    const double p2p_fit = r.comm_fit.predict_us(CommPattern::send_recv, 2, 16384);
    const double ar_fit = r.comm_fit.predict_us(CommPattern::all_reduce, 2, 16384);
    for (int i = 0; i < asleep; ++i)
      r.in_situ.comm.push_back({CommPattern::send_recv, 2, 16384, p2p_fit + 500, 1, exec::kPollSpinUs + 100.0, exec::kPollSpinUs + 100.0});
    for (int i = 0; i < 30; ++i) r.in_situ.comm.push_back({CommPattern::send_recv, 2, 16384, p2p_fit + i, 1, 0.0, 0.0});
    for (int i = 0; i < collectives; ++i) r.in_situ.comm.push_back({CommPattern::all_reduce, 2, 16384, ar_fit + 100 + i, 1, 0.0, 0.0});
    fit_all(r);
    CAPTURE(collectives, asleep);
    REQUIRE(r.have_in_situ_comm());
    CHECK(r.in_situ_asleep_calls == 0);
    test::TempFile topo(topology_toml(r), "calibrated-p2p.toml");
    const Topology t = load_topology(topo.path());
    CHECK(t.collectives.launch_lat_us == Approx(r.comm_fit.launch_us + r.comm_in_situ_extra_us).epsilon(1e-5));
    if (collectives >= 20) {
      // Transfers: 0..29 us beyond the fit (and 500 us for the late ones); collectives
      // 100..129 us. Each kind is of one size, so its own per-call cost takes it all.
      std::vector<double> p2p_extras = range_us(0, 30);
      p2p_extras.insert(p2p_extras.end(), static_cast<size_t>(asleep), 500.0);
      const double p2p_extra = weighted_extra(p2p_extras, p2p_fit);
      CHECK(r.p2p_extra_own);
      CHECK(r.comm_in_situ_bytes_slowdown == 0.0);
      CHECK(r.in_situ_awake_transfers == static_cast<size_t>(30 + asleep));
      CHECK(r.comm_in_situ_extra_us == Approx(weighted_extra(range_us(100, 30), ar_fit)));
      CHECK(r.p2p_in_situ_extra_us == Approx(p2p_extra));
      REQUIRE(t.collectives.p2p_launch_lat_us);
      CHECK(t.collectives.p2p_launch_us() == Approx(r.comm_fit.launch_us + p2p_extra).epsilon(1e-5));
    } else {
      // One per-call cost for both (an all-reduce of 16 KB puts as many bytes on its link as a
      // 16 KB transfer here, so no slope tells them apart): the weighted median of all 40.
      std::vector<std::pair<double, double>> all;
      for (double e : range_us(0, 30)) all.push_back({e, 1.0 / (p2p_fit + e)});
      for (double e : range_us(100, collectives)) all.push_back({e, 1.0 / (ar_fit + e)});
      CHECK_FALSE(r.p2p_extra_own);
      CHECK(r.comm_in_situ_bytes_slowdown == 0.0);
      CHECK(r.comm_in_situ_extra_us == Approx(weighted_median(all)));
      CHECK(r.comm_in_situ_extra_us == Approx(r.p2p_in_situ_extra_us));
      CHECK_FALSE(t.collectives.p2p_launch_lat_us);
      CHECK(t.collectives.p2p_launch_us() == t.collectives.launch_lat_us);
    }
  }
}

// Too few transfers for a cost of their own beside enough collectives (cpu-tp2-pp2-gpipe: 12-16
// awake transfers against 300+ collectives): the transfers take the sweep's L alone, not the
// collectives' in-situ cost, and the collectives' cost is theirs alone. With too few of both,
// one cost for all, as before.
TEST_CASE("in situ, a few transfers beside many collectives take the sweep's L", "[analysis][calibrate]") {
  const StepIR base_ir = build_step_ir(test::scenario_from(cpu_scenario("cpu-host")));
  for (const int collectives : {30, 10}) {
    CalibrationResult r = synthetic_result(base_ir);
    const double p2p_fit = r.comm_fit.predict_us(CommPattern::send_recv, 2, 16384);
    const double ar_fit = r.comm_fit.predict_us(CommPattern::all_reduce, 2, 16384);
    // Ten receives 3..12 us beyond the fit; the collectives 100.. us beyond theirs.
    for (int i = 0; i < 10; ++i) r.in_situ.comm.push_back({CommPattern::send_recv, 2, 16384, p2p_fit + 3 + i, 1, 0.0, 0.0});
    for (int i = 0; i < collectives; ++i) r.in_situ.comm.push_back({CommPattern::all_reduce, 2, 16384, ar_fit + 100 + i, 1, 0.0, 0.0});
    fit_all(r);
    CAPTURE(collectives);
    REQUIRE(r.have_in_situ_comm());
    CHECK_FALSE(r.p2p_extra_own);
    CHECK(r.in_situ_awake_transfers == 10);
    test::TempFile topo(topology_toml(r), "calibrated-few-p2p.toml");
    const std::string text = topology_toml(r);
    const Topology t = load_topology(topo.path());
    if (collectives >= 20) {
      CHECK(r.p2p_sweep_only);
      CHECK(r.p2p_in_situ_extra_us == 0.0);
      CHECK(r.comm_in_situ_extra_us == Approx(weighted_extra(range_us(100, 30), ar_fit)));
      REQUIRE(t.collectives.p2p_launch_lat_us);
      CHECK(t.collectives.p2p_launch_us() == Approx(r.comm_fit.launch_us).epsilon(1e-5));
      CHECK(t.collectives.launch_lat_us == Approx(r.comm_fit.launch_us + r.comm_in_situ_extra_us).epsilon(1e-5));
      CHECK(text.find("fitted L alone: 10 transfers executed") != std::string::npos);
    } else {
      CHECK_FALSE(r.p2p_sweep_only);
      CHECK(r.p2p_in_situ_extra_us == Approx(r.comm_in_situ_extra_us));
      std::vector<std::pair<double, double>> all;  // one weighted median over all 20
      for (double e : range_us(3, 10)) all.push_back({e, 1.0 / (p2p_fit + e)});
      for (double e : range_us(100, 10)) all.push_back({e, 1.0 / (ar_fit + e)});
      CHECK(r.comm_in_situ_extra_us == Approx(weighted_median(all)));
      CHECK_FALSE(t.collectives.p2p_launch_lat_us);
    }
  }
}
