// paralab tests — `paralab calibrate --upgrade` (analysis/calibration/upgrade.hpp): the stored
// GPU calibrations of bench/results/gpu/, converted to schema 2, predict their scenarios as
// their schema-1 originals did (within 0.5 %); upgrading a schema-1 file gives the committed
// conversion exactly; what was host noise is dropped and said so; calls keyed by group kind
// that meet in one class are refused.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "analysis/calibration/upgrade.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/step_ir.hpp"
#include "ir/topology_loader.hpp"
#include "sim/simulate.hpp"
#include "../ir/test_util.hpp"

using namespace paralab;
using namespace paralab::calib;

namespace {

std::filesystem::path src() { return std::filesystem::path(PARALAB_SOURCE_DIR); }

std::string read(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

double simulate_on(const std::string& scenario, const std::filesystem::path& calibration) {
  const Scenario s = load_scenario(src() / "scenarios" / (scenario + ".toml"), {"cluster.topology=" + calibration.string()});
  return sim::simulate(build_step_ir(s)).result.step_time_s;
}

}  // namespace

// The predictions of the schema-1 files by the simulator of commit e4bdfbd (the last with
// the per-effect keys), recorded before the change: bench/results/calibration_upgrade.md.
TEST_CASE("converted GPU calibrations predict their scenarios as the originals did", "[analysis][upgrade]") {
  const std::filesystem::path dir = src() / "bench" / "results" / "gpu" / "2026-11-30-h200";
  const std::pair<const char*, double> old_step_s[] = {
      {"gpu-1", 0.9163641407944618},
      {"gpu-1-llama", 1.0503562891605411},
      {"gpu-1-fp16", 1.028861195500072},
      {"gpu-1-fp8", 0.895429063962246},
  };
  for (const auto& [scenario, old_s] : old_step_s) {
    INFO(scenario);
    const std::filesystem::path f = dir / ("cuda-np1-" + std::string(scenario) + ".calibration.toml");
    const Topology t = load_topology(f);
    CHECK(t.calibration.schema_version == kCalibrationSchema);
    CHECK_FALSE(t.calibration.gemm.empty());
    CHECK(simulate_on(scenario, f) == Approx(old_s).epsilon(0.005));
  }
}

TEST_CASE("upgrading a schema-1 file gives the committed conversion", "[analysis][upgrade]") {
  const std::filesystem::path old_file = src() / "tests" / "analysis" / "data" / "schema1" / "cuda-np1-gpu-1.calibration.toml";
  CHECK_THROWS_WITH(load_topology(old_file), Catch::Contains("--upgrade"));  // refused as it is
  const Upgrade u = upgrade_calibration(old_file);
  const std::string text = upgrade_toml(u, old_file);
  CHECK(text == read(src() / "bench" / "results" / "gpu" / "2026-11-30-h200" / "cuda-np1-gpu-1.calibration.toml"));
  // The host's real costs became rows; its noise was dropped, each named.
  const CorrectionTable& c = u.topology.calibration.corrections;
  CHECK(c.find(CostKind::dispatch, OpFacts{OpKind::gemm}).fixed_us == 1.953);
  CHECK(c.find(CostKind::handoff, OpFacts{OpKind::gemm}).fixed_us == 1.892);
  CHECK(c.find(CostKind::handoff, OpFacts{OpKind::collective}).fixed_us == 1.566);
  auto dropped = [&](const std::string& key) {
    for (const std::string& d : u.dropped)
      if (d.rfind(key, 0) == 0 || d.find(" " + key + " ") != std::string::npos) return true;
    return false;
  };
  for (const char* k : {"device.compute_tail", "device.handoff_on_core_us", "collectives.sync_skew_us", "launches", "step_fast_s"}) {
    INFO(k);
    CHECK(dropped(k));
  }
  // A file of the current schema is returned as it is.
  test::TempFile now(text, "now.toml");
  CHECK(upgrade_calibration(now.path()).dropped.empty());
}

TEST_CASE("schema-1 call costs become time rows within a node; two groups in one class are refused", "[analysis][upgrade]") {
  const std::string head =
      "name = \"x\"\n[device]\nkind = \"cpu\"\npeak_fp32_tflops = 0.1\nmemory_gib = 8\nmem_bw_gbps = 10\ndispatch_us = 40\n"
      "[node]\ndevices_per_node = 2\nintra = \"shm\"\nintra_bw_gbps = 5\n[collectives]\nlaunch_lat_us = 20\npoll_spin_us = 500\n";
  const std::string ag = "[[calibration.call]]\ncollective = \"all_gather\"\ngroup = \"tp\"\nphase = \"fwd\"\nlaunch_lat_us = 61.5\n";
  test::TempFile one(head + ag + "beside_lat_us = 90\n", "one.toml");
  const Upgrade u = upgrade_calibration(one.path());
  const OpFacts f{OpKind::collective, CollKind::all_gather, Span::intra_node, Phase::forward, 4096};
  CHECK(u.topology.calibration.corrections.find(CostKind::time, f).fixed_us == Approx(41.5));
  CHECK(u.topology.calibration.corrections.find(CostKind::dispatch, f).fixed_us == 40.0);
  test::TempFile out(upgrade_toml(u, one.path()), "one-new.toml");
  CHECK(load_topology(out.path()).calibration.corrections.rows().size() == 2);
  const std::string dp = "[[calibration.call]]\ncollective = \"all_gather\"\ngroup = \"dp\"\nphase = \"fwd\"\nlaunch_lat_us = 80\n";
  test::TempFile two(head + ag + dp, "two.toml");
  CHECK_THROWS_WITH(upgrade_calibration(two.path()), Catch::Contains("span, not group kind"));
}
