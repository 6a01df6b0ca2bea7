// paralab tests — the planner on a GB200 NVL72 rack uses its NVLink domain: for Llama 3 405B on
// 144 GPUs with a small batch it picks a layout whose tensor x context group spans trays, which
// it does not pick on DGX B200 nodes, because there that group's context ring and gradient
// reduction cross InfiniBand.
#include <catch2/catch.hpp>

#include "plan/planner.hpp"
#include "../ir/test_util.hpp"

using namespace paralab;

namespace {

Scenario base(const std::string& topology, int64_t nodes) {
  const std::string toml = "[model]\npreset = \"llama3-405b\"\n[training]\nglobal_batch_size = 16\nmicro_batch_size = 1\n"
                           "[parallel]\npipeline = 9\nzero_stage = 1\n[cluster]\ntopology = \"" + topology +
                           "\"\nnodes = " + std::to_string(nodes) + "\n";
  test::TempFile f(toml);
  return load_scenario(f.path(), {}, /*check_layout=*/false);
}

double exposed(const PlannedLayout& l, CommClass c) { return l.result.breakdown.exposed_comm_s[static_cast<size_t>(c)]; }

}  // namespace

TEST_CASE("on NVL72 the planner puts a model-parallel group across trays that B200 nodes would not", "[plan][nvlink]") {
  const Scenario nvl = base("gb200-nvl72", 36), b200 = base("dgx-b200", 18);
  REQUIRE(nvl.cluster.devices() == b200.cluster.devices());
  PlanOptions o;
  o.threads = 2;
  o.top = 3;
  o.refine = 4;
  // The schedules whose bubble depends on the layout alone: zero-bubble schedules make a deep
  // pipeline cheap on both machines and hide the difference this test is about.
  o.bounds.schedules = {Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved};
  const PlanResult a = plan(nvl, o);
  o.bounds.max_tensor = 72;  // let B200 try tensor parallelism across nodes too
  const PlanResult b = plan(b200, o);
  REQUIRE_FALSE(a.layouts.empty());
  REQUIRE_FALSE(b.layouts.empty());
  const PlannedLayout& win = a.layouts[0];
  INFO(win.candidate.label() << " on NVL72; " << b.layouts[0].candidate.label() << " on B200");
  // Its tensor x context group is larger than a tray (4 GPUs) and than a B200 node (8).
  CHECK(win.candidate.tensor * win.candidate.context > 8);
  CHECK(win.candidate.key() != b.layouts[0].candidate.key());
  // The same layout on B200 nodes: slower, its context and data-parallel traffic on InfiniBand.
  const PlannedLayout there = simulate_layout(b200, win.candidate, Fidelity::exact);
  CHECK(there.result.step_time_s > win.result.step_time_s);
  CHECK(exposed(there, CommClass::cp) + exposed(there, CommClass::dp) >
        2 * (exposed(win, CommClass::cp) + exposed(win, CommClass::dp)));
  CHECK(b.layouts[0].result.step_time_s > win.result.step_time_s);
}
