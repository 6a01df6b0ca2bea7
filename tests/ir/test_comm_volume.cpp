// paralab tests — communication volume per rank against the closed forms.
#include <catch2/catch.hpp>

#include "ir/accounting.hpp"
#include "ir/step_ir.hpp"
#include "test_util.hpp"

using namespace paralab;

namespace {

double comm(const StepSummary& s, int stage, CommClass c) {
  return s.stages[static_cast<size_t>(stage)].comm_bytes[static_cast<size_t>(c)];
}

// Gradient bytes one rank reduces: every bucket, padded, in the gradient dtype.
double gradient_bytes(const StepIR& ir, int stage) {
  double total = 0;
  for (const Buffer& b : ir.stages[static_cast<size_t>(stage)].buffers)
    if (b.category == MemCategory::grads && b.resident) total += static_cast<double>(b.bytes());
  return total;
}

}  // namespace

TEST_CASE("DDP all-reduces 2(n-1)/n N per rank (ring all-reduce volume)", "[ir][comm]") {
  // Patarasuk & Yuan 2009; seed 000 "Ring AllReduce": each rank sends 2(n-1)/n of the buffer.
  for (int n : {2, 4, 8}) {
    INFO("n = " << n);
    const StepIR ir = build_step_ir(test::scenario_from(
        test::tiny_gpt(), {"cluster.devices_per_node=" + std::to_string(n), "training.global_batch_size=" + std::to_string(n),
                           "training.clip_grad=0"}));
    const double N = gradient_bytes(ir, 0);
    CHECK(comm(summarize(ir), 0, CommClass::dp) == Approx(2.0 * (n - 1) / n * N).epsilon(1e-12));
  }
}

TEST_CASE("FSDP (ZeRO-3) moves 3N per rank against DDP's 2N: 1.5x", "[ir][comm]") {
  // Seed 000, "FSDP Communication Volume": all-gather for forward, again for backward, and a
  // reduce-scatter of gradients, each (n-1)/n N, against the all-reduce's 2(n-1)/n N.
  const auto sets = [](int zero) {
    return std::vector<std::string>{"parallel.zero_stage=" + std::to_string(zero), "training.clip_grad=0"};
  };
  const StepIR ddp = build_step_ir(test::scenario_from(test::tiny_gpt(), sets(0)));
  const StepIR fsdp = build_step_ir(test::scenario_from(test::tiny_gpt(), sets(3)));
  const double n = 8;
  const double N_ddp = gradient_bytes(ddp, 0);
  const double v_ddp = comm(summarize(ddp), 0, CommClass::dp);
  const double v_fsdp = comm(summarize(fsdp), 0, CommClass::dp);
  CHECK(v_ddp == Approx(2 * (n - 1) / n * N_ddp).epsilon(1e-12));
  // Padding of per-layer buckets differs by a few elements: 0.1%.
  CHECK(v_fsdp == Approx(3 * (n - 1) / n * N_ddp).epsilon(1e-3));
  CHECK(v_fsdp / v_ddp == Approx(1.5).epsilon(1e-3));
}

TEST_CASE("ZeRO-1 and ZeRO-2 move DDP's volume (reduce-scatter + all-gather)", "[ir][comm]") {
  // Rajbhandari et al. 2020, Sec. 7: stages 1 and 2 keep DDP's 2 Psi communication.
  const StepIR ddp = build_step_ir(test::scenario_from(test::tiny_gpt(), {"training.clip_grad=0"}));
  const double v_ddp = comm(summarize(ddp), 0, CommClass::dp);
  for (int zero : {1, 2}) {
    const StepIR z = build_step_ir(test::scenario_from(
        test::tiny_gpt(), {"parallel.zero_stage=" + std::to_string(zero), "training.clip_grad=0"}));
    CHECK(comm(summarize(z), 0, CommClass::dp) == Approx(v_ddp).epsilon(1e-12));
  }
}

TEST_CASE("tensor-parallel volume per layer is Megatron's four all-reduces", "[ir][comm]") {
  // Shoeybi et al. 2019, Sec. 3: two all-reduces in the forward pass and two in the backward
  // pass of each layer, each over the [s b, h] activations: 4 * 2(t-1)/t * 2 s b h bytes.
  // A middle stage of a 4-stage pipeline holds only layers.
  const int t = 4;
  const StepIR ir = build_step_ir(test::scenario_from(
      test::tiny_gpt(), {"parallel.tensor=4", "parallel.pipeline=4", "cluster.devices_per_node=16",
                         "training.global_batch_size=4", "parallel.scatter_gather_tensors_in_pipeline=false"}));
  const double sbh_bytes = 64.0 * 1 * 64 * 2;
  const double layers = 2, m = 4;
  const StepSummary sum = summarize(ir);
  CHECK(comm(sum, 1, CommClass::tp) == Approx(layers * m * 4 * 2.0 * (t - 1) / t * sbh_bytes).epsilon(1e-12));
  // Pipeline: one activation forward and one gradient backward per micro-batch.
  CHECK(comm(sum, 1, CommClass::pp) == Approx(2 * m * sbh_bytes).epsilon(1e-12));
}

TEST_CASE("scatter/gather sends 1/t of a boundary tensor per TP rank", "[ir][comm]") {
  // Narayanan et al. 2021, Sec. 4.1.
  const StepIR ir = build_step_ir(test::scenario_from(
      test::tiny_gpt(), {"parallel.tensor=4", "parallel.pipeline=4", "cluster.devices_per_node=16",
                         "training.global_batch_size=4"}));
  const double sbh_bytes = 64.0 * 64 * 2;
  CHECK(comm(summarize(ir), 1, CommClass::pp) == Approx(2 * 4 * sbh_bytes / 4).epsilon(1e-12));
}

TEST_CASE("sequence parallelism keeps the forward volume of tensor parallelism", "[ir][comm]") {
  // Korthikanti et al. 2022, Sec. 4.2.2: all-gather + reduce-scatter = one all-reduce. The
  // backward pass also re-gathers the norm outputs for the weight gradients (Megatron).
  const auto sets = [](bool sp) {
    return std::vector<std::string>{"parallel.tensor=4", "parallel.pipeline=4", "cluster.devices_per_node=16",
                                    "training.global_batch_size=4", "parallel.scatter_gather_tensors_in_pipeline=false",
                                    std::string("parallel.sequence_parallel=") + (sp ? "true" : "false")};
  };
  const StepIR tp = build_step_ir(test::scenario_from(test::tiny_gpt(), sets(false)));
  const StepIR sp = build_step_ir(test::scenario_from(test::tiny_gpt(), sets(true)));
  double fwd_tp = 0, fwd_sp = 0;
  for (const Op& op : tp.stages[1].ops)
    if (op.phase == Phase::forward && op.collective()) fwd_tp += op.wire_bytes(4);
  for (const Op& op : sp.stages[1].ops)
    if (op.phase == Phase::forward && op.collective()) fwd_sp += op.wire_bytes(4);
  CHECK(fwd_sp == Approx(fwd_tp).epsilon(1e-12));
}
