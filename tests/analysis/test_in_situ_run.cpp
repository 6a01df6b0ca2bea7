// paralab tests — the calibration's in-situ executions spread over launches
// (analysis/in_situ_run.hpp): each launch's share of the plan; an earlier launch's traces read
// back by the measuring job give the samples the executions themselves give, in launch and run
// order; a trace of another scenario is refused by name; a real execution on one rank.
#include <catch2/catch.hpp>

#include <algorithm>

#include <filesystem>
#include <fstream>

#include "analysis/in_situ.hpp"
#include "analysis/in_situ_run.hpp"
#include "analysis/temp_dir.hpp"
#include "exec/comm.hpp"
#include "ir/step_ir.hpp"
#include "results/result_io.hpp"
#include "sim/simulate.hpp"
#include "../ir/test_util.hpp"

using namespace paralab;
using namespace paralab::calib;

namespace {

std::string tiny(int layers, int tensor) {
  return "[model]\npreset = \"tiny\"\nnum_layers = " + std::to_string(layers) +
         "\n[training]\nglobal_batch_size = 2\nmicro_batch_size = 1\nprecision = \"fp32\"\n[parallel]\ntensor = " +
         std::to_string(tensor) + "\n[cluster]\ntopology = \"cpu-host\"\nnodes = 1\ndevices_per_node = " + std::to_string(tensor) + "\n";
}

// A simulated step with every op stretched by `scale` (a different "execution").
StepResult stretched(const StepResult& r, double scale) {
  StepResult s = r;
  for (OpTiming& t : s.ops) {
    t.start_us *= scale;
    t.end_us *= scale;
  }
  s.step_time_s *= scale;
  return s;
}

}  // namespace

TEST_CASE("each launch executes its share of the in-situ plan", "[analysis][calibrate]") {
  CHECK(InSituPlan{1}.measured_s() == Approx(4.0));
  CHECK(InSituPlan{1}.max_executions() == 10);
  CHECK(InSituPlan{4}.measured_s() == Approx(1.0));
  CHECK(InSituPlan{4}.max_executions() == 3);  // 12 at most over 4 launches
  CHECK(InSituPlan{20}.max_executions() == 1);  // at least one each
  CHECK(InSituPlan::kDefaultLaunches == 4);
}

TEST_CASE("earlier launches' in-situ traces read back in launch and run order, as the executions' samples",
          "[analysis][calibrate]") {
  const StepIR ir = build_step_ir(test::scenario_from(tiny(2, 2)));
  const StepResult base = sim::simulate(ir).result;
  REQUIRE(base.ops.size() > 20);
  TempDir dir("paralab-test-in-situ");
  std::vector<StepResult> first, second;
  for (int r = 0; r < 11; ++r) first.push_back(stretched(base, 1.0 + 0.01 * r));  // r10 must come after r9
  for (int r = 0; r < 2; ++r) second.push_back(stretched(base, 2.0 + 0.01 * r));
  write_in_situ_traces(dir.path() / "launch-1", 0, ir, first);
  write_in_situ_traces(dir.path() / "launch-2", 0, ir, second);
  // Another scenario's traces in the same directory, under another index: not read for index 0.
  const StepIR other = build_step_ir(test::scenario_from(tiny(3, 2)));
  write_in_situ_traces(dir.path() / "launch-1", 1, other, {sim::simulate(other).result});
  std::ofstream(dir.path() / "launch-1" / "s0-rx.json") << "not a trace";  // not numbered: not one of ours

  const InSituTraces back = read_in_situ_traces(dir.path(), 0, ir);
  CHECK(back.launches == 2);
  REQUIRE(back.runs.size() == 13);
  std::vector<StepResult> all = first;
  all.insert(all.end(), second.begin(), second.end());
  InSituSamples direct, read;
  for (size_t i = 0; i < all.size(); ++i) {
    CHECK(back.runs[i].step_time_s == Approx(all[i].step_time_s).epsilon(1e-6));
    collect_in_situ(ir, all[i], "execution test", direct);
    collect_in_situ(ir, back.runs[i], "execution test", read);
  }
  CHECK(read.executions == direct.executions);
  REQUIRE(read.dispatch_us.size() == direct.dispatch_us.size());
  for (size_t i = 0; i < read.dispatch_us.size(); ++i) CHECK(read.dispatch_us[i] == Approx(direct.dispatch_us[i]).margin(0.01));
  REQUIRE(read.comm.size() == direct.comm.size());
  REQUIRE_FALSE(read.comm.empty());
  for (size_t i = 0; i < read.comm.size(); ++i) {
    CHECK(read.comm[i].time_us == Approx(direct.comm[i].time_us).margin(0.01));
    CHECK(read.comm[i].waited_us == Approx(direct.comm[i].waited_us).margin(0.01));
  }
  REQUIRE(read.compute.size() == direct.compute.size());
  for (const auto& [k, s] : direct.compute) CHECK(read.compute.at(k).us.size() == s.us.size());

  // A trace of another scenario under this index is refused, naming the file.
  write_in_situ_traces(dir.path() / "launch-3", 0, other, {sim::simulate(other).result});
  try {
    (void)read_in_situ_traces(dir.path(), 0, ir);
    FAIL("another scenario's trace was read");
  } catch (const std::runtime_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("launch-3/s0-r0.json"));
    CHECK_THAT(e.what(), Catch::Contains("not of '" + ir.scenario.name + "'"));
  }
  CHECK_THROWS_WITH(read_in_situ_traces(dir.path() / "none", 0, ir), Catch::Contains("cannot read the in-situ traces"));
}

TEST_CASE("an in-situ launch executes the scenario for real, within its share", "[analysis][calibrate]") {
  const StepIR ir = build_step_ir(test::scenario_from(tiny(1, 1)));
  const auto world = exec::make_self_transport();
  for (int launches : {1, 4}) {
    double units = 0;
    const InSituPlan plan{launches};
    const std::vector<StepResult> runs =
        execute_in_situ(ir, *world, "cpu", plan, [&](double add, const std::string& what) {
          units += add;
          CHECK(what == "execution, " + ir.scenario.name);
        });
    REQUIRE(!runs.empty());
    // Each execution measures the steps that fit in kStepsS, at most kStepsPerExecution.
    CHECK(static_cast<int>(runs.size()) <= plan.max_executions() * InSituPlan::kStepsPerExecution);
    CHECK(units == Approx(4.0));
    double slowest = 0;
    for (const StepResult& r : runs) {
      CHECK(r.kind == "measured");
      CHECK(r.step_time_s > 0);
      CHECK(r.ops.size() == ir.stages[0].ops.size());
      slowest = std::max(slowest, r.step_time_s);
    }
    // A step this short (about a millisecond) fits several times in an execution's window.
    if (slowest < 0.02) CHECK(static_cast<int>(runs.size()) > plan.max_executions());
  }
}
