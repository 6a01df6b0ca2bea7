// paralab tests — optimizer and parameter offload in the IR (docs/offload.md): where the state
// lives (ZeRO-Offload's placement: fp32 master and moments on the host, Ren et al. 2021), the
// copies and host steps and their order, Megatron-LM's offload fraction, and the checks that
// refuse what Megatron-LM and DeepSpeed refuse.
#include <catch2/catch.hpp>

#include <algorithm>

#include "ir/accounting.hpp"
#include "ir/error.hpp"
#include "ir/step_ir.hpp"
#include "test_util.hpp"

using namespace paralab;

namespace {

// A small GPT on one A100 with the distributed optimizer; tests add the offload keys.
Scenario offload_scenario(std::vector<std::string> sets) {
  const std::string base =
      "[model]\nnum_layers = 4\nhidden_size = 512\nnum_attention_heads = 8\nvocab_size = 1024\nseq_length = 256\n"
      "[training]\nglobal_batch_size = 4\nmicro_batch_size = 2\nprecision = \"bf16\"\n"
      "[parallel]\ntensor = 1\npipeline = 1\ndata = 1\nzero_stage = 1\ndp_bucket_mb = 2\n"
      "[cluster]\ntopology = \"dgx-a100\"\nnodes = 1\ndevices_per_node = 1\n";
  return test::scenario_from(base, sets);
}

struct Counts {
  int d2h = 0, h2d = 0, host_steps = 0, device_steps = 0;
  double host_optimizer_bytes = 0, device_optimizer_bytes = 0, host_bytes = 0;
};

Counts count(const StepGraph& g) {
  Counts c;
  for (const Op& op : g.ops) {
    if (op.kind == OpKind::copy) (op.stream == Stream::d2h ? c.d2h : c.h2d) += 1;
    if (op.kind == OpKind::optimizer_step) (op.stream == Stream::host ? c.host_steps : c.device_steps) += 1;
  }
  for (const Buffer& b : g.buffers) {
    if (b.host) c.host_bytes += static_cast<double>(b.bytes());
    if (b.category != MemCategory::optimizer) continue;
    (b.host ? c.host_optimizer_bytes : c.device_optimizer_bytes) += static_cast<double>(b.bytes());
  }
  return c;
}

}  // namespace

TEST_CASE("optimizer offload moves the optimizer state to host memory", "[ir][offload]") {
  const StepIR base = build_step_ir(offload_scenario({}));
  const StepIR off = build_step_ir(offload_scenario({"training.optimizer_cpu_offload=true"}));
  const Counts b = count(base.stages[0]), o = count(off.stages[0]);
  const int64_t params = base.stages[0].model_params;
  // fp32 master + two Adam moments: 12 bytes per parameter (ZeRO's K = 12), padding aside.
  CHECK(b.device_optimizer_bytes >= 12.0 * static_cast<double>(params));
  CHECK(o.device_optimizer_bytes == 0);
  CHECK(o.host_optimizer_bytes == b.device_optimizer_bytes);
  // One copy of every bucket's gradients down and its parameters up, one host step each; the
  // clipping norm's scalar goes down too (clip_grad = 1 by default).
  CHECK(o.host_steps == b.device_steps);
  CHECK(o.device_steps == 0);
  CHECK(o.h2d == o.host_steps);
  CHECK(o.d2h == o.host_steps + 1);
  // The device's peak falls by what moved; the host holds it plus the staging (bf16 grads and params).
  const MemoryBreakdown mb = replay_memory(base.stages[0]), mo = replay_memory(off.stages[0]);
  CHECK(mb.resident_total() - mo.resident_total() == Approx(b.device_optimizer_bytes));
  CHECK(mo.host_resident == Approx(o.host_bytes));
  CHECK(mo.host_resident >= b.device_optimizer_bytes + 4.0 * static_cast<double>(params));
  const StepSummary s = summarize(off);
  CHECK(s.host_memory_bytes_per_node == Approx(mo.host_resident));
  CHECK(s.fits_in_host_memory);
  CHECK_FALSE(summarize(base).host_memory_bytes_per_node > 0);
}

TEST_CASE("the offload fraction splits each shard between host and device", "[ir][offload]") {
  const StepIR base = build_step_ir(offload_scenario({}));
  const Counts b = count(base.stages[0]);
  for (double f : {0.25, 0.5, 0.9}) {
    CAPTURE(f);
    const StepIR ir = build_step_ir(
        offload_scenario({"training.optimizer_cpu_offload=true", "training.optimizer_offload_fraction=" + std::to_string(f)}));
    const Counts c = count(ir.stages[0]);
    CHECK(c.host_optimizer_bytes + c.device_optimizer_bytes == b.device_optimizer_bytes);
    CHECK(c.host_optimizer_bytes / b.device_optimizer_bytes == Approx(f).margin(1e-3));
    CHECK(c.device_steps == c.host_steps);  // every bucket is split
  }
  // Fraction 0: nothing on the host, as without offload.
  const Counts z = count(build_step_ir(offload_scenario({"training.optimizer_cpu_offload=true",
                                                          "training.optimizer_offload_fraction=0"})).stages[0]);
  CHECK(z.host_steps == 0);
  CHECK(z.device_optimizer_bytes == b.device_optimizer_bytes);
}

TEST_CASE("offload copies and host steps follow the overlap setting", "[ir][offload]") {
  for (bool overlap : {false, true}) {
    CAPTURE(overlap);
    const StepIR ir = build_step_ir(offload_scenario(
        {"training.optimizer_cpu_offload=true", std::string("training.overlap_cpu_optimizer_d2h_h2d=") + (overlap ? "true" : "false")}));
    const StepGraph& g = ir.stages[0];
    std::vector<OpId> d2h, steps, h2d;
    for (const Op& op : g.ops) {
      if (op.kind == OpKind::copy && op.stream == Stream::d2h && std::string_view(op.name) == "grad_d2h") d2h.push_back(op.id);
      if (op.kind == OpKind::optimizer_step) steps.push_back(op.id);
      if (op.kind == OpKind::copy && op.stream == Stream::h2d) h2d.push_back(op.id);
    }
    REQUIRE(d2h.size() >= 2);
    REQUIRE(steps.size() == d2h.size());
    auto waits = [&](OpId later, OpId earlier) {
      const auto& d = g.ops[later].deps;
      return std::find(d.begin(), d.end(), earlier) != d.end();
    };
    // Each host step waits for its own bucket's gradients; each copy up for its own step.
    for (size_t i = 0; i < steps.size(); ++i) {
      CHECK(g.ops[steps[i]].stream == Stream::host);
      CHECK(waits(steps[i], d2h[i]));
      CHECK(waits(h2d[i], steps[i]));
    }
    // Without overlap every copy down precedes every step, and every step every copy up.
    CHECK(waits(steps.front(), d2h.back()) == !overlap);
    CHECK(waits(h2d.front(), steps.back()) == !overlap);
    // The copies down start after the gradients are final: after the backward pass.
    OpId last_compute = 0;
    for (const Op& op : g.ops)
      if (op.stream == Stream::compute && op.id < d2h.front()) last_compute = op.id;
    CHECK(last_compute > 0);
  }
}

TEST_CASE("ZeRO-3 parameter offload keeps weight shards on the host", "[ir][offload]") {
  const std::vector<std::string> sets = {"cluster.devices_per_node=2", "parallel.data=2", "parallel.zero_stage=3",
                                         "training.optimizer_cpu_offload=true"};
  std::vector<std::string> with_params = sets;
  with_params.push_back("parallel.offload_param=cpu");
  const StepIR opt = build_step_ir(offload_scenario(sets));
  const StepIR par = build_step_ir(offload_scenario(with_params));
  int gathers = 0, staged = 0, param_h2d_opt = 0;
  for (const Op& op : par.stages[0].ops) {
    if (const auto* c = op.collective(); c && c->kind == CollKind::all_gather) ++gathers;
    if (op.kind == OpKind::copy && op.stream == Stream::h2d) ++staged;
  }
  for (const Op& op : opt.stages[0].ops)
    if (op.kind == OpKind::copy && op.stream == Stream::h2d) ++param_h2d_opt;
  // Every gather is fed by a copy of the host shard; no copy up after the step (the host step
  // writes the host shard itself).
  CHECK(gathers > 0);
  CHECK(staged == gathers);
  double host_weights = 0, device_weights = 0;
  for (const Buffer& b : par.stages[0].buffers)
    if (b.resident && b.category == MemCategory::weights) (b.host ? host_weights : device_weights) += static_cast<double>(b.bytes());
  CHECK(device_weights == 0);
  CHECK(host_weights > 0);
  CHECK(replay_memory(par.stages[0]).resident_total() < replay_memory(opt.stages[0]).resident_total());
  CHECK(param_h2d_opt > 0);
}

TEST_CASE("offload refuses what Megatron-LM and DeepSpeed refuse", "[ir][offload][errors]") {
  auto fails = [](std::vector<std::string> sets, const std::string& key, const std::string& words) {
    CAPTURE(key, words);
    try {
      (void)offload_scenario(sets);
      FAIL("accepted");
    } catch (const ConfigError& e) {
      CHECK(e.key() == key);
      CHECK_THAT(e.what(), Catch::Contains(words));
    }
  };
  fails({"training.optimizer_cpu_offload=true", "parallel.zero_stage=0"}, "training.optimizer_cpu_offload",
        "distributed optimizer");
  fails({"parallel.offload_param=cpu", "parallel.zero_stage=2", "training.optimizer_cpu_offload=true"},
        "parallel.offload_param", "ZeRO stage 3");
  fails({"parallel.offload_param=cpu", "parallel.zero_stage=3", "training.optimizer_cpu_offload=true"},
        "parallel.offload_param", "data x context");
  fails({"parallel.offload_param=cpu", "parallel.zero_stage=3", "parallel.data=2", "cluster.devices_per_node=2"},
        "parallel.offload_param", "whole optimizer");
  fails({"training.optimizer_cpu_offload=true", "cluster.topology=cpu-host", "training.precision=fp32"}, "training.optimizer_cpu_offload",
        "CPU host");
  fails({"training.optimizer_offload_fraction=1.5"}, "training.optimizer_offload_fraction", "");
  fails({"parallel.offload_param=disk"}, "parallel.offload_param", "cpu");
}

TEST_CASE("inspect says when the offloaded state does not fit in host memory", "[ir][offload]") {
  Scenario s = offload_scenario({"training.optimizer_cpu_offload=true"});
  const StepSummary fits = summarize(build_step_ir(s));
  CHECK(fits.fits_in_host_memory);
  s.topology.host.memory_gib = fits.host_memory_bytes_per_node / (1024.0 * 1024.0 * 1024.0) / 2;  // half of what it needs
  const StepSummary over = summarize(build_step_ir(s));
  CHECK_FALSE(over.fits_in_host_memory);
  CHECK(over.host_memory_bytes_per_node == Approx(fits.host_memory_bytes_per_node));
}
