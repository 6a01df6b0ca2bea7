// paralab tests — nn.DataParallel in the IR (docs/dataparallel.md): device 0's graph has the
// parameter broadcast and the input scatter before the forward, the replicas' logits gathered
// for a loss over the whole batch and their gradient scattered back, the gradients reduced onto
// it after the whole backward, one launch per forward op for every GPU; and the checks that
// keep it to what torch.nn.DataParallel runs.
#include <catch2/catch.hpp>

#include <algorithm>

#include "ir/accounting.hpp"
#include "ir/error.hpp"
#include "ir/step_ir.hpp"
#include "test_util.hpp"

using namespace paralab;

namespace {

Scenario dp_scenario(std::vector<std::string> sets = {}) {
  const std::string base =
      "[model]\nnum_layers = 2\nhidden_size = 256\nnum_attention_heads = 4\nvocab_size = 1024\nseq_length = 128\n"
      "[training]\nglobal_batch_size = 16\nmicro_batch_size = 4\nprecision = \"bf16\"\n"
      "[parallel]\ntensor = 1\npipeline = 1\ndata = 4\ndata_parallel_impl = \"dataparallel\"\n"
      "[cluster]\ntopology = \"dgx-a100\"\nnodes = 1\ndevices_per_node = 4\n";
  return test::scenario_from(base, sets);
}

// Collectives of `kind` over the data-parallel group (the gradient norm's all-reduce is not).
int count_collectives(const StepGraph& g, CollKind kind) {
  int n = 0;
  for (const Op& op : g.ops)
    if (const auto* c = op.collective(); c && c->kind == kind && c->group == GroupKind::dp) ++n;
  return n;
}

}  // namespace

TEST_CASE("nn.DataParallel's step on device 0", "[ir][dataparallel]") {
  const StepIR dp = build_step_ir(dp_scenario());
  const StepIR ddp = build_step_ir(dp_scenario({"parallel.data_parallel_impl=ddp"}));
  const StepGraph& g = dp.stages[0];
  REQUIRE(dp.layout.representative(0) == 0);  // the graph is device 0's
  // Broadcast of every bucket (replicate), reduce of every bucket (Broadcast's backward); DDP
  // all-reduces instead and broadcasts nothing.
  const int buckets = count_collectives(ddp.stages[0], CollKind::all_reduce);
  CHECK(buckets > 0);
  CHECK(count_collectives(g, CollKind::broadcast) == buckets);
  CHECK(count_collectives(g, CollKind::reduce) == buckets);
  CHECK(count_collectives(g, CollKind::all_reduce) == 0);
  CHECK(count_collectives(ddp.stages[0], CollKind::broadcast) == 0);
  // Inputs scattered, logits gathered, their gradient scattered back: once per step.
  CHECK(count_collectives(g, CollKind::scatter) == 2);
  CHECK(count_collectives(g, CollKind::gather) == 1);
  const int64_t T = 4 * 128;  // the device's tokens
  for (const Op& op : g.ops) {
    if (op.kind == OpKind::xent_sum || op.kind == OpKind::xent_bwd) CHECK(op.kernel()->rows == 4 * T);
    if (const auto* c = op.collective(); c && c->kind == CollKind::gather)
      CHECK(c->bytes == 4 * T * 1024 * 2);  // the whole batch's bf16 logits arrive on device 0
  }
  // The reduce waits for the whole backward: its first bucket depends on the last backward op.
  OpId last_backward = 0, first_reduce = kNoOp;
  for (const Op& op : g.ops) {
    if (op.stream == Stream::compute && op.phase == Phase::backward) last_backward = op.id;
    if (const auto* c = op.collective(); c && c->kind == CollKind::reduce && first_reduce == kNoOp) first_reduce = op.id;
  }
  REQUIRE(first_reduce != kNoOp);
  const auto& deps = g.ops[first_reduce].deps;
  CHECK(std::find(deps.begin(), deps.end(), last_backward) != deps.end());
  // One launch (for all four GPUs) before every forward op on the device; none in backward.
  int launches = 0, forward_ops = 0;
  for (const Op& op : g.ops) {
    if (op.kind == OpKind::launch) {
      ++launches;
      CHECK(op.stream == Stream::host);
      CHECK(op.kernel()->rows == 4);
    } else if (op.phase == Phase::forward && !off_device(op.stream)) {
      ++forward_ops;
    }
  }
  CHECK(launches == forward_ops);
  CHECK(launches > 10);
  // Device 0 holds the whole batch's softmax: more memory than a DDP rank.
  CHECK(summarize(dp).peak_memory_bytes > summarize(ddp).peak_memory_bytes);
}

TEST_CASE("nn.DataParallel is refused where torch.nn.DataParallel cannot run", "[ir][dataparallel][errors]") {
  auto fails = [](std::vector<std::string> sets, const std::string& words) {
    CAPTURE(words);
    try {
      (void)dp_scenario(sets);
      FAIL("accepted");
    } catch (const ConfigError& e) {
      CHECK(e.key() == "parallel.data_parallel_impl");
      CHECK_THAT(e.what(), Catch::Contains(words));
    }
  };
  fails({"cluster.nodes=2", "parallel.data=8", "training.global_batch_size=32"}, "one machine");
  fails({"parallel.tensor=2", "parallel.data=2"}, "tensor, pipeline and context must be 1");
  fails({"parallel.zero_stage=1"}, "no ZeRO");
  fails({"training.global_batch_size=32"}, "one batch");
  CHECK_THROWS_AS(dp_scenario({"parallel.data_parallel_impl=threads"}), ConfigError);
}
