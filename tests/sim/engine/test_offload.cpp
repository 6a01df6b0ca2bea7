// paralab tests — optimizer offload in the simulator (docs/offload.md): a copy's time is its
// bytes over the GPU's link to host memory plus the copy's fixed cost, a host step streams its
// bytes at the host's share of DRAM bandwidth; copies and host steps run beside the device,
// serialized or pipelined as overlap_cpu_optimizer_d2h_h2d says; device memory falls by the
// state moved, the step pays what is not hidden.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "engine_test_util.hpp"
#include "sim/compute/compute_model.hpp"

using namespace paralab;
using namespace paralab::sim;

namespace {

Scenario offload_case(std::vector<std::string> sets) {
  const std::string toml =
      "[model]\nnum_layers = 8\nhidden_size = 2048\nnum_attention_heads = 16\nvocab_size = 32000\nseq_length = 1024\n"
      "[training]\nglobal_batch_size = 4\nmicro_batch_size = 2\nprecision = \"bf16\"\noptimizer = \"adam\"\n"
      "[parallel]\ntensor = 1\npipeline = 1\ndata = 1\nzero_stage = 1\ndp_bucket_mb = 32\n"
      "[cluster]\ntopology = \"dgx-h100\"\nnodes = 1\ndevices_per_node = 1\n";
  return test::load_inline(toml, sets);
}

}  // namespace

TEST_CASE("a copy costs its bytes over the host link, a host step its bytes over host DRAM", "[sim][offload]") {
  const Scenario s = offload_case({"training.optimizer_cpu_offload=true"});
  const StepIR ir = build_step_ir(s);
  const Topology& t = s.topology;
  // The engine's view of the node: one GPU here, so the host's whole bandwidth is its share.
  Topology one = t;
  one.node.devices_per_node = 1;
  const ComputeModel cm(one);
  const HostSpec& h = t.host;
  int copies = 0, steps = 0;
  for (const Op& op : ir.stages[0].ops) {
    if (op.kind == OpKind::copy) {
      ++copies;
      CHECK(cm.duration_us(op) == Approx(op.bytes / (h.link.bw_gbps * h.link.efficiency * 1e3) + h.link.lat_us));
    } else if (op.stream == Stream::host) {
      ++steps;
      CHECK(cm.duration_us(op) == Approx(op.bytes / (h.mem_bw_gbps * h.mem_efficiency * 1e3)));
    }
  }
  CHECK(copies > 2);
  CHECK(steps > 1);
  // The node's eight GPUs share the host: each gets an eighth of its bandwidth.
  const ComputeModel node(t);
  for (const Op& op : ir.stages[0].ops)
    if (op.stream == Stream::host) CHECK(node.duration_us(op) == Approx(8 * cm.duration_us(op)));
  // Without a [host] section an off-device op cannot be timed.
  Topology bare = one;
  bare.host = HostSpec{};
  const ComputeModel no_host(bare);
  for (const Op& op : ir.stages[0].ops)
    if (op.kind == OpKind::copy) {
      CHECK_THROWS_WITH(no_host.duration_us(op), Catch::Contains("[host]"));
      break;
    }
}

TEST_CASE("offload frees device memory and costs step time; overlap pipelines it", "[sim][offload]") {
  const Simulation base = simulate(build_step_ir(offload_case({})));
  const Simulation serial = simulate(build_step_ir(offload_case({"training.optimizer_cpu_offload=true"})));
  const Simulation piped = simulate(
      build_step_ir(offload_case({"training.optimizer_cpu_offload=true", "training.overlap_cpu_optimizer_d2h_h2d=true"})));
  // Device memory: the optimizer state (12 bytes per parameter) left; the host holds it.
  const double moved = base.memory[0].resident[static_cast<size_t>(MemCategory::optimizer)];
  CHECK(moved > 0);
  CHECK(base.memory[0].resident_total() - serial.memory[0].resident_total() == Approx(moved));
  CHECK(serial.memory[0].host_resident > moved);
  CHECK(serial.result.peak_memory_gib < base.result.peak_memory_gib);
  // Step time: copies and host steps are slower than the device's fused Adam.
  CHECK(serial.result.step_time_s > base.result.step_time_s);
  CHECK(piped.result.step_time_s < serial.result.step_time_s);
  CHECK(piped.result.step_time_s > base.result.step_time_s);
  // One GPU: nothing runs on the device beside the optimizer, so it is exposed offload time.
  CHECK(serial.result.breakdown.offload_s > 0);
  CHECK(base.result.breakdown.offload_s == 0);
  CHECK(piped.result.breakdown.offload_s < serial.result.breakdown.offload_s);

  // Serialized: the copies down, the host steps and the copies up run back to back, so the
  // chain spans the sum of their durations.
  const StepIR ir = build_step_ir(offload_case({"training.optimizer_cpu_offload=true"}));
  double first = 1e300, last = 0, sum = 0;
  for (const OpTiming& t : serial.result.ops) {
    const Op& op = ir.stages[0].ops[t.op];
    if (!off_device(op.stream) || std::string_view(op.name) == "scalar_d2h") continue;
    first = std::min(first, t.start_us);
    last = std::max(last, t.end_us);
    sum += t.end_us - t.start_us;
  }
  CHECK(last - first == Approx(sum).epsilon(1e-9));
}
