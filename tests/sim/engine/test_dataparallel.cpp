// paralab tests — nn.DataParallel against DDP in the simulator (docs/dataparallel.md), on the
// seed notes' comparison (../shared/seeds/003: ResNet-50, batch 256, 4 V100s; DDP 1.8x faster,
// GPU 0 the busiest) as bench/sim/dataparallel/seed-resnet50-size.toml describes it. The
// figures are in bench/results/dataparallel.md.
#include <catch2/catch.hpp>

#include <filesystem>

#include "engine_test_util.hpp"
#include "results/device_busy.hpp"

using namespace paralab;
using namespace paralab::sim;

namespace {
Scenario seed_workload(const std::string& impl) {
  const std::filesystem::path f =
      std::filesystem::path(PARALAB_SOURCE_DIR) / "bench" / "sim" / "dataparallel" / "seed-resnet50-size.toml";
  return load_scenario(f, {"parallel.data_parallel_impl=" + impl});
}
}  // namespace

TEST_CASE("DDP is faster than nn.DataParallel and device 0 is DataParallel's busiest", "[sim][dataparallel]") {
  const StepIR dp_ir = build_step_ir(seed_workload("dataparallel"));
  const Simulation dp = simulate(dp_ir);
  const Simulation ddp = simulate(build_step_ir(seed_workload("ddp")));
  const double ratio = dp.result.step_time_s / ddp.result.step_time_s;
  CAPTURE(ratio);
  // What the model gives (bench/results/dataparallel.md): DDP faster by the broadcast, the
  // gathered loss on device 0, the scatters and the reduce it does not overlap; the seed's
  // 1.8x also holds Python-side costs no topology describes.
  CHECK(ratio > 1.1);
  CHECK(ratio < 2.2);
  // Device 0 computes the loss of the whole batch and the optimizer; its replicas do not.
  const DeviceBusy busy = dataparallel_busy(dp.result, dp_ir);
  CHECK(busy.root_s > busy.replica_s);
  CHECK(busy.root_s < dp.result.step_time_s);
  // The communication DDP hides behind the backward, DataParallel exposes.
  double dp_exposed = 0, ddp_exposed = 0;
  for (double x : dp.result.breakdown.exposed_comm_s) dp_exposed += x;
  for (double x : ddp.result.breakdown.exposed_comm_s) ddp_exposed += x;
  CHECK(dp_exposed > 5 * ddp_exposed);
}
