// tests/exec — per-rank plans: the IR's sharding conventions (docs/ir.md: ZeRO shards named by
// rank 0's view; Megatron's pipeline slices), the job's communicators, and buffer fills.
#include <catch2/catch.hpp>

#include <set>

#include "exec_test_util.hpp"

using namespace paralab;
using namespace paralab::exec;
using namespace paralab::exec::test;

namespace {
const Op* first_op(const StepGraph& g, OpKind k, std::string_view name = {}) {
  for (const Op& op : g.ops)
    if (op.kind == k && (name.empty() || name == op.name)) return &op;
  return nullptr;
}
}  // namespace

TEST_CASE("ZeRO-1: the optimizer, the reduce-scatter and the parameter all-gather use this rank's shard", "[exec][plan]") {
  const StepIR ir = build_step_ir(scenario("cpu-tp2-dp2-zero3", {"parallel.zero_stage=1"}));
  for (int64_t rank = 0; rank < 4; ++rank) {
    const RankPlan p = plan_rank(ir, rank, false);
    const StepGraph& g = *p.graph;
    const Op* opt = first_op(g, OpKind::optimizer_step);
    REQUIRE(opt);
    const ResolvedRef& grad = p.ops[opt->id].reads[0];
    const int64_t elements = g.buffer(grad.buffer).elements;
    CHECK(grad.numel * 2 == elements);
    CHECK(grad.offset == p.dp_index * grad.numel);
    CHECK(p.ops[opt->id].writes[0].offset == p.dp_index * grad.numel);  // weights shard
    const Op* gather = first_op(g, OpKind::collective, "param_all_gather");
    REQUIRE(gather);
    CHECK(p.ops[gather->id].reads[0].offset == p.dp_index * p.ops[gather->id].reads[0].numel);
    CHECK(p.ops[gather->id].writes[0].offset == 0);
    // Activations are never shifted.
    const Op* qkv = first_op(g, OpKind::gemm, "qkv");
    REQUIRE(qkv);
    CHECK(p.ops[qkv->id].reads[0].offset == qkv->reads[0].offset);
  }
}

TEST_CASE("scatter/gather pipeline transfers: tensor rank i sends slice i", "[exec][plan]") {
  const StepIR ir = build_step_ir(scenario("cpu-tp2-pp2-gpipe"));
  for (int64_t rank : {0, 1}) {  // stage 0, tp 0 and 1
    const RankPlan p = plan_rank(ir, rank, false);
    const Op* send = first_op(*p.graph, OpKind::send);
    REQUIRE(send);
    REQUIRE(send->p2p()->slices == 2);
    const ResolvedRef& r = p.ops[send->id].reads[0];
    CHECK(r.offset == send->reads[0].offset + p.coord.tp * r.numel);
    CHECK(p.ops[send->id].send_to == 1);  // next stage in the pp group
    CHECK(p.ops[send->id].group == std::vector<int64_t>{rank, rank + 2});
  }
}

TEST_CASE("the job's communicators are the same list on every rank, one per group and stream", "[exec][plan]") {
  const StepIR ir = build_step_ir(scenario("cpu-pp4"));
  const std::vector<CommKey> comms = job_comms(ir);
  std::set<std::string> labels;
  for (const CommKey& k : comms) labels.insert(k.label());
  CHECK(labels.size() == comms.size());
  CHECK(labels.count("pp/p2p"));
  CHECK(labels.count("embd/dp_comm"));  // tied embedding gradients, first + last stage only
  for (const char* g : {"tp", "cp", "dp", "pp", "embd", "mp", "world"}) CHECK(labels.count(std::string(g) + "/base"));
  for (int64_t rank = 0; rank < 4; ++rank) {
    const RankPlan p = plan_rank(ir, rank, false);
    CHECK(p.comms == comms);
    for (const Op& op : p.graph->ops)
      if (is_comm(op.kind)) {
        REQUIRE(p.ops[op.id].comm >= 0);
        CHECK(p.comms[static_cast<size_t>(p.ops[op.id].comm)].p2p == (op.kind != OpKind::collective));
      }
  }
}

TEST_CASE("fills: replicas share weights, tensor ranks share tokens, accumulators start at zero", "[exec][plan]") {
  const StepIR ir = build_step_ir(scenario("cpu-tp2-dp2-zero3", {"parallel.zero_stage=0"}));
  const RankPlan r0 = plan_rank(ir, 0, false), r1 = plan_rank(ir, 1, false), r2 = plan_rank(ir, 2, false);
  const StepGraph& g = *r0.graph;
  int weights = 0, tokens = 0;
  for (BufferId b = 0; b < g.buffers.size(); ++b) {
    const Buffer& buf = g.buffers[b];
    if (buf.resident && buf.category == MemCategory::weights) {
      ++weights;
      CHECK(r0.buffers[b].fill == Fill::weights);
      CHECK(r0.buffers[b].key == r2.buffers[b].key);  // rank 2 = same tp, other dp replica
      CHECK(r0.buffers[b].key != r1.buffers[b].key);  // rank 1 = other tensor shard
    }
    if (buf.resident && buf.category == MemCategory::grads) CHECK(r0.buffers[b].fill == Fill::zero);
    if (r0.buffers[b].fill == Fill::token_ids) {
      ++tokens;
      CHECK(buf.dtype == DType::i32);
      // Tokens are elements of the global batch: the same on both tensor ranks of a micro-batch,
      // the next samples on the other data-parallel rank.
      CHECK(r0.buffers[b].key == r1.buffers[b].key);
      CHECK(r0.buffers[b].global_offset == r1.buffers[b].global_offset);
      CHECK(r0.buffers[b].key == r2.buffers[b].key);
      CHECK(r2.buffers[b].global_offset - r0.buffers[b].global_offset ==
            ir.scenario.num_microbatches() * ir.scenario.training.micro_batch_size * ir.scenario.model.seq_length);
    }
  }
  CHECK(weights > 0);
  CHECK(tokens == 2 * ir.scenario.num_microbatches());  // token ids and labels per micro-batch
  // --verify poisons what is written before it is read, and nothing else.
  const RankPlan pv = plan_rank(ir, 0, true);
  for (BufferId b = 0; b < g.buffers.size(); ++b)
    if (pv.buffers[b].fill == Fill::poison) CHECK(r0.buffers[b].fill == Fill::none);
}
