// Export a scenario's step as Chakra traces, read them back, replay them: the replayed step
// equals paralab's own simulation of the scenario. The mapping is exact: compute nodes carry
// the simulated duration exactly ("paralab_duration_us", beside Chakra's integer
// duration_micros), every call becomes the same NetworkModel call on the same ranks (each
// instance separately rather than as the representative's symmetric copies, which load the
// same links at the same times), and no topology used here has corrections (dispatch gaps the
// traces would not carry). So the tolerance is 1e-9 relative, floating-point summation order
// only; with whole microseconds only it is half a microsecond per node on the critical path.
#include <catch2/catch.hpp>

#include <cmath>

#include "chakra/chakra_import.hpp"
#include "chakra_test_util.hpp"
#include "sim/replay/replay.hpp"

using namespace paralab;

namespace {

struct RoundTrip {
  sim::Simulation sim;
  sim::replay::TraceSet set;
  sim::replay::ReplayResult replayed;
  Topology topo;
};

RoundTrip round_trip(const std::vector<std::string>& sets) {
  const Scenario s = load_scenario(std::filesystem::path(PARALAB_SOURCE_DIR) / "scenarios/quickstart.toml", sets);
  const StepIR ir = build_step_ir(s);
  RoundTrip rt{sim::simulate(ir), {}, {}, s.topology};
  calib::TempDir dir("paralab-chakra-test");
  chakra::test::write_export(chakra::export_chakra(ir, rt.sim), dir.path());
  rt.set = chakra::read_chakra(dir.path());
  REQUIRE(static_cast<int64_t>(rt.set.ranks.size()) == ir.layout.world());
  REQUIRE(rt.set.devices_per_node == ir.layout.devices_per_node());
  rt.replayed = sim::replay::replay(rt.set, rt.topo);
  return rt;
}

const std::vector<std::string> kDgx = {"cluster.topology=dgx-a100", "cluster.devices_per_node=8", "training.precision=bf16"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("round trip: quickstart (TP2 + SP on a CPU host) replays to paralab's step time", "[chakra]") {
  const RoundTrip rt = round_trip({});
  CHECK(rt.replayed.step_us * 1e-6 == Approx(rt.sim.result.step_time_s).epsilon(1e-9));
  CHECK(rt.replayed.nodes_by_kind[static_cast<size_t>(sim::replay::NodeKind::collective)] > 0);
}

TEST_CASE("round trip: TP2 PP2 CP2 on a DGX A100 (transfers, ring shifts, cross-stage collectives)", "[chakra]") {
  const RoundTrip rt = round_trip(with(kDgx, {"cluster.nodes=1", "parallel.tensor=2", "parallel.pipeline=2", "parallel.context=2"}));
  CHECK(rt.replayed.step_us * 1e-6 == Approx(rt.sim.result.step_time_s).epsilon(1e-9));
  CHECK(rt.replayed.nodes_by_kind[static_cast<size_t>(sim::replay::NodeKind::send)] > 0);
  CHECK(rt.replayed.nodes_by_kind[static_cast<size_t>(sim::replay::NodeKind::send)] ==
        rt.replayed.nodes_by_kind[static_cast<size_t>(sim::replay::NodeKind::recv)]);
  CHECK(rt.replayed.critical_compute_us + rt.replayed.critical_comm_us + rt.replayed.critical_wait_us ==
        Approx(rt.replayed.step_us).epsilon(1e-9));
}

TEST_CASE("round trip: TP2 PP2 DP4 on two DGX A100 nodes (InfiniBand)", "[chakra]") {
  const RoundTrip rt = round_trip(with(kDgx, {"cluster.nodes=2", "parallel.tensor=2", "parallel.pipeline=2", "parallel.data=4"}));
  CHECK(rt.replayed.step_us * 1e-6 == Approx(rt.sim.result.step_time_s).epsilon(1e-9));
  REQUIRE(rt.set.ranks.size() == 16);
  CHECK(rt.set.groups.size() > 4);  // tp, dp, pp-joining groups on real ranks
}

TEST_CASE("round trip with whole microseconds only: within half a microsecond per critical node", "[chakra]") {
  RoundTrip rt = round_trip(with(kDgx, {"cluster.nodes=1", "parallel.tensor=2", "parallel.pipeline=2", "parallel.data=2"}));
  for (auto& r : rt.set.ranks)
    for (auto& n : r.nodes)
      if (n.duration_us) n.duration_us = std::round(*n.duration_us);  // what duration_micros alone keeps
  const sim::replay::ReplayResult coarse = sim::replay::replay(rt.set, rt.topo);
  const double bound = 0.5 * static_cast<double>(std::max(coarse.critical_nodes, rt.replayed.critical_nodes));
  CHECK(std::abs(coarse.step_us - rt.sim.result.step_time_s * 1e6) <= bound);
}
