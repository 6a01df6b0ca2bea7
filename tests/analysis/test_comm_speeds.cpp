// paralab tests — a class of communication at two speeds across launches
// (analysis/comm_speeds.hpp): found where the launches split into a fast and a slow group, not
// for one slow launch, a steady class, an even spread, too few launches or ops, or compute ops;
// on random durations drawn from two levels and from one; the classes of a trace's ops; and a
// class's calls in validate's reference against the calibration's executions of them.
#include <catch2/catch.hpp>

#include <random>
#include <stdexcept>

#include "analysis/comm_speeds.hpp"

using namespace paralab;
using namespace paralab::calib;

namespace {

// `ops` ops of class `cls` (ids from `first`), one run per launch, each launch's ops taking
// `launch_us[l]` (times `jitter(l, op)`, default 1).
void add_class(RunDurations& d, std::map<std::pair<int64_t, OpId>, std::string>& cls_of, const std::string& cls,
               OpId first, int ops, const std::vector<double>& launch_us) {
  for (int i = 0; i < ops; ++i) {
    const std::pair<int64_t, OpId> key{0, first + static_cast<OpId>(i)};
    cls_of[key] = cls;
    for (double us : launch_us) d[key].push_back(us * (1.0 + 0.01 * (i % 5)));
  }
}

std::vector<int> one_run_per_launch(size_t n) {
  std::vector<int> l(n);
  for (size_t i = 0; i < n; ++i) l[i] = static_cast<int>(i);
  return l;
}

}  // namespace

TEST_CASE("two speeds: quickstart's forward all-gathers in the forty-third session's reference", "[analysis][noise]") {
  // The per-launch medians of N9's 7 runs (bench/results/validate_cpu.md): 81, 84, 74, 72, 268,
  // 193, 230 us. Fast group 72-84 (median 77.5 us), slow 193-268 (230), gap 84 -> 193.
  RunDurations d;
  std::map<std::pair<int64_t, OpId>, std::string> cls;
  const std::vector<double> launch_us = {81, 84, 74, 72, 268, 193, 230};
  add_class(d, cls, "all_gather tp, fwd", 0, 20, launch_us);
  // The backward ones, steady, and a compute op of two speeds (not communication: no class).
  add_class(d, cls, "all_gather tp, bwd", 100, 20, {150, 148, 152, 149, 151, 150, 147});
  d[{0, 500}] = {10, 10, 10, 10, 40, 40, 40};
  const std::vector<CommSpeeds> s = comm_two_speeds(d, cls, one_run_per_launch(7));
  REQUIRE(s.size() == 1);
  CHECK(s[0].cls == "all_gather tp, fwd");
  CHECK(s[0].ops == 20);
  CHECK(s[0].fast_launches == 4);
  CHECK(s[0].slow_launches == 3);
  // Each launch's median over its ops: the launch's value x 1.02 (the ops take 1.00-1.04 x it).
  CHECK(s[0].fast_us == Approx(1.02 * (74 + 81) / 2.0));
  CHECK(s[0].slow_us == Approx(1.02 * 230));
  CHECK(s[0].ratio() == Approx(230.0 / 77.5));
  const std::string w = two_speeds_warning(s[0]);
  CHECK(w.rfind("warning: the all_gather tp, fwd calls (20 per run) ran at two speeds", 0) == 0);
  CHECK(w.find("in 4 launches") != std::string::npos);
}

TEST_CASE("two speeds: not for one slow launch, a steady or evenly spread class, few launches or ops", "[analysis][noise]") {
  std::map<std::pair<int64_t, OpId>, std::string> cls;
  RunDurations one_slow, steady, spread, few_ops, near;
  add_class(one_slow, cls, "a", 0, 20, {70, 72, 68, 250, 71, 69});      // one launch is an outlier
  add_class(steady, cls, "a", 0, 20, {70, 72, 68, 71, 71, 69});
  // 15 launches from 60 to 260 us evenly: no gap of 30 % between neighbours.
  std::vector<double> even;
  for (int i = 0; i < 15; ++i) even.push_back(60.0 + 200.0 * i / 14.0);
  add_class(spread, cls, "a", 0, 20, even);
  add_class(few_ops, cls, "a", 0, kMinOpsPerClass - 1, {70, 72, 250, 260, 71, 255});
  add_class(near, cls, "a", 0, 20, {70, 72, 130, 135, 71, 128});  // a clear gap, but under 2x
  CHECK(comm_two_speeds(one_slow, cls, one_run_per_launch(6)).empty());
  CHECK(comm_two_speeds(steady, cls, one_run_per_launch(6)).empty());
  CHECK(comm_two_speeds(spread, cls, one_run_per_launch(15)).empty());
  CHECK(comm_two_speeds(few_ops, cls, one_run_per_launch(6)).empty());
  CHECK(comm_two_speeds(near, cls, one_run_per_launch(6)).empty());
  RunDurations three;
  add_class(three, cls, "a", 0, 20, {70, 250, 260});
  CHECK(comm_two_speeds(three, cls, one_run_per_launch(3)).empty());
  // Two slow launches among four are two speeds.
  RunDurations two_slow;
  add_class(two_slow, cls, "a", 0, 20, {70, 250, 72, 260});
  CHECK(comm_two_speeds(two_slow, cls, one_run_per_launch(4)).size() == 1);
}

TEST_CASE("two speeds: a launch's runs pool into its median; the launches must be one per run", "[analysis][noise]") {
  // 4 launches of 3 runs; launches 1 and 3 slow in two of their three runs, so their medians are slow.
  std::map<std::pair<int64_t, OpId>, std::string> cls;
  RunDurations d;
  for (int op = 0; op < 12; ++op) {
    cls[{op % 2, op}] = "reduce_scatter tp, bwd";
    d[{op % 2, op}] = {60, 61, 250, 250, 251, 62, 59, 60, 240, 65, 245, 247};
  }
  const std::vector<int> launch = {0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3};
  const auto s = comm_two_speeds(d, cls, launch);
  REQUIRE(s.size() == 1);
  CHECK(s[0].fast_launches == 2);
  CHECK(s[0].slow_launches == 2);
  CHECK(s[0].fast_us == Approx(60.5));   // launch medians 61 and 60
  CHECK(s[0].slow_us == Approx(247.5));  // 250 and 245
  CHECK_THROWS_AS(comm_two_speeds(d, cls, {0, 1, 2, 3}), std::invalid_argument);
}

TEST_CASE("two speeds on random durations: found for two levels, never for one", "[analysis][noise]") {
  std::mt19937 rng(20261127);
  std::lognormal_distribution<double> noise(0.0, 0.15);  // 15 % per op and launch
  std::bernoulli_distribution slow_launch(0.4);
  std::map<std::pair<int64_t, OpId>, std::string> cls;
  int found_two = 0, found_one = 0;
  for (int trial = 0; trial < 200; ++trial) {
    RunDurations two, one;
    std::vector<double> level(12);
    int slow = 0;
    for (double& l : level) {
      const bool s = slow_launch(rng);
      slow += s;
      l = s ? 250.0 : 65.0;
    }
    for (int op = 0; op < 40; ++op) {
      cls[{0, op}] = "all_gather tp, fwd";
      for (int l = 0; l < 12; ++l) {
        two[{0, op}].push_back(level[static_cast<size_t>(l)] * noise(rng));
        one[{0, op}].push_back(65.0 * noise(rng));
      }
    }
    const bool both = slow >= kMinLaunchesPerSpeed && 12 - slow >= kMinLaunchesPerSpeed;
    found_two += both && comm_two_speeds(two, cls, one_run_per_launch(12)).size() == 1;
    found_one += !comm_two_speeds(one, cls, one_run_per_launch(12)).empty();
    if (!both) ++found_two;  // nothing to find: counted as found, so the check below is over all
  }
  CHECK(found_two == 200);
  CHECK(found_one == 0);
}

TEST_CASE("comm classes: a trace's collectives and transfers by class and phase", "[analysis][noise]") {
  LoadedResult r;
  r.has_ops = true;
  auto add = [&r](int64_t rank, OpId op, const std::string& kind, const std::string& collective,
                  const std::string& group, const std::string& phase) {
    OpTiming t;
    t.rank = rank;
    t.op = op;
    r.result.ops.push_back(t);
    OpMeta m;
    m.kind = kind, m.collective = collective, m.group = group, m.phase = phase;
    r.meta.push_back(m);
  };
  add(0, 3, "collective", "all_gather", "tp", "fwd");
  add(1, 4, "send", "", "pp", "bwd");
  add(0, 5, "layernorm_fwd", "", "", "fwd");
  const auto c = comm_classes(r);
  REQUIRE(c.size() == 2);
  CHECK(c.at({0, 3}) == "all_gather tp, fwd");
  CHECK(c.at({1, 4}) == "send pp, bwd");
  r.has_ops = false;
  CHECK(comm_classes(r).empty());
}

TEST_CASE("calls since calibration: the reference's class medians against the calibration's executed ones",
          "[analysis][noise]") {
  LoadedResult r;
  r.has_ops = true;
  auto add = [&r](OpId op, double us, const std::string& collective, const std::string& phase) {
    OpTiming t;
    t.rank = 0;
    t.op = op;
    t.start_us = 1000.0 * static_cast<double>(op);
    t.end_us = t.start_us + us;
    r.result.ops.push_back(t);
    OpMeta m;
    m.kind = "collective", m.collective = collective, m.group = "tp", m.phase = phase;
    r.meta.push_back(m);
  };
  // Forward all-gathers at 240-260 us (median 250), backward ones at 150, a transfer (no class).
  add(0, 240, "all_gather", "fwd");
  add(1, 250, "all_gather", "fwd");
  add(2, 260, "all_gather", "fwd");
  add(3, 150, "all_gather", "bwd");
  add(4, 152, "all_gather", "bwd");
  OpTiming t;
  t.rank = 0, t.op = 5, t.start_us = 0, t.end_us = 90;
  r.result.ops.push_back(t);
  OpMeta send;
  send.kind = "send", send.group = "pp", send.phase = "fwd";
  r.meta.push_back(send);
  std::vector<CallPoint> calls;
  calls.push_back({CollKind::all_gather, GroupKind::tp, Phase::forward, 120.0, 66.0});
  calls.push_back({CollKind::all_gather, GroupKind::tp, Phase::backward, 150.0, 148.0});
  calls.push_back({CollKind::reduce_scatter, GroupKind::tp, Phase::backward, 150.0, 140.0});  // none measured
  calls.push_back({CollKind::all_gather, GroupKind::dp, Phase::forward, 50.0, 0.0});          // not recorded
  const auto c = calls_since_calibration(r, calls);
  REQUIRE(c.size() == 2);
  CHECK(c[0].cls == "all_gather tp, fwd");
  CHECK(c[0].ops == 3);
  CHECK(c[0].calibrated_us == 66.0);
  CHECK(c[0].measured_us == 250.0);
  CHECK(c[0].ratio() == Approx(250.0 / 66.0));
  CHECK(c[1].cls == "all_gather tp, bwd");
  CHECK(c[1].measured_us == Approx(151.0));
  const std::string w = call_drift_warning(c[0]);
  CHECK(w.rfind("warning: the all_gather tp, fwd calls took a median 250 us in these runs and 66 us", 0) == 0);
  r.has_ops = false;
  CHECK(calls_since_calibration(r, calls).empty());

  // validate's table: both classes on the "calls" line; the speeds line only with speeds.
  const std::string table = comm_speed_table(c, {});
  CHECK(table.rfind("calls       each collective class's median call in the calibration's executions -> these runs:\n"
                    "            all_gather tp, fwd 66 -> 250 us (3.79x); all_gather tp, bwd 148 -> 151 us (1.02x)\n\n",
                    0) == 0);
  CHECK(table.find("speeds") == std::string::npos);
  CommSpeeds sp;
  sp.cls = "all_gather tp, fwd", sp.fast_us = 66, sp.slow_us = 253.4, sp.fast_launches = 4, sp.slow_launches = 3;
  CHECK(comm_speed_table({}, {sp}) ==
        "speeds      communication that ran at two speeds across the launches:\n"
        "            all_gather tp, fwd 66 us in 4 launches, 253.4 us in 3 (3.8x)\n\n");
  CHECK(comm_speed_table({}, {}).empty());
  // Many classes wrap under the label, none past 100 columns.
  const std::vector<CallsSinceCalibration> many(6, c[0]);
  const std::string wrapped = comm_speed_table(many, {});
  size_t start = 0, lines = 0;
  for (size_t nl; (nl = wrapped.find('\n', start)) != std::string::npos; start = nl + 1, ++lines) {
    CHECK(nl - start <= 101);  // 100 and the ";" that continues the list
    CHECK((nl == start || wrapped[nl - 1] != ' '));
  }
  CHECK(lines >= 4);
}
