// paralab tests — invariants every generated StepGraph keeps, over a sweep of layouts:
// dependencies point backwards, every buffer is allocated before use and freed once after,
// every view lies inside its buffer, pipeline transfers pair up across stages, the op count per
// layer and micro-batch is what the model needs, and generation is deterministic.
#include <catch2/catch.hpp>

#include <optional>

#include <map>
#include <set>
#include <sstream>

#include "ir/ir_json.hpp"

#include <nlohmann/json.hpp>
#include "ir/step_ir.hpp"
#include "test_util.hpp"

using namespace paralab;

namespace {

const std::vector<std::vector<std::string>> kLayouts = {
    {},
    {"parallel.tensor=2", "parallel.sequence_parallel=true"},
    {"parallel.tensor=2", "parallel.pipeline=2", "parallel.zero_stage=1"},
    {"parallel.pipeline=4", "parallel.schedule=gpipe", "parallel.zero_stage=2"},
    {"parallel.pipeline=2", "parallel.virtual_pipeline_stages=2", "parallel.schedule=interleaved",
     "training.global_batch_size=16"},
    {"parallel.context=2", "parallel.tensor=2", "parallel.sequence_parallel=true"},
    {"parallel.zero_stage=3", "training.recompute=full"},
    {"parallel.zero_stage=3", "parallel.pipeline=2", "model.preset=tiny-llama"},
    {"training.attention=unfused", "training.recompute=selective", "parallel.tensor=4", "training.precision=fp16"},
    {"model.preset=tiny-llama", "parallel.tensor=2", "parallel.pipeline=2", "training.recompute=full",
     "parallel.overlap_grad_reduce=false", "parallel.overlap_param_gather=false", "parallel.zero_stage=1"},
    {"model.untie_embeddings=true", "parallel.pipeline=2", "training.optimizer=sgd", "training.precision=fp32"},
    // Megatron-LM as of 2021 (bench/sim/megatron/narayanan2021.toml), with fp32 gradients.
    {"parallel.tensor=2", "parallel.pipeline=2", "training.precision=fp16", "training.recompute=full",
     "training.attention=unfused", "training.gradient_accumulation_fusion=false",
     "parallel.async_tensor_model_parallel_allreduce=false", "training.accumulate_allreduce_grads_in_fp32=true",
     "parallel.overlap_grad_reduce=false"},
};

void check_graph(const StepIR& ir, const StepGraph& g) {
  std::vector<int> state(g.buffers.size(), 0);  // 0 unallocated, 1 live, 2 freed
  for (size_t b = 0; b < g.buffers.size(); ++b)
    if (g.buffers[b].resident) state[b] = 1;
  size_t in_streams = 0;
  for (const auto& s : g.streams) in_streams += s.size();
  REQUIRE(in_streams == g.ops.size());
  for (const Op& op : g.ops) {
    INFO(op.full_name());
    for (OpId d : op.deps) {
      REQUIRE(d < op.id);
      REQUIRE(g.ops[d].stream != op.stream);
    }
    for (BufferId b : op.allocs) {
      REQUIRE(state[b] == 0);
      state[b] = 1;
    }
    for (const auto* ts : {&op.reads, &op.writes})
      for (const TensorRef& t : *ts) {
        REQUIRE(state[t.buffer] == 1);
        REQUIRE(t.offset + t.numel() <= g.buffers[t.buffer].elements);
        REQUIRE(t.dtype == g.buffers[t.buffer].dtype);
      }
    for (BufferId b : op.frees) {
      REQUIRE(state[b] == 1);
      REQUIRE(!g.buffers[b].resident);
      state[b] = 2;
    }
    REQUIRE(op.flops >= op.model_flops);
    if (op.phase == Phase::recompute) REQUIRE(op.model_flops == 0);
  }
  // Memory returns to its steady state: every transient buffer was freed.
  for (size_t b = 0; b < g.buffers.size(); ++b)
    if (!g.buffers[b].resident) REQUIRE(state[b] == 2);
  (void)ir;
}

// Every send has exactly one matching receive on the peer stage, and vice versa.
void check_transfers(const StepIR& ir) {
  std::multiset<std::tuple<int64_t, int64_t, uint32_t>> sends, recvs;  // (from stage, to stage, tag)
  for (const StepGraph& g : ir.stages) {
    const int64_t rank = ir.layout.representative(g.stage);
    for (const Op& op : g.ops) {
      const auto* p = op.p2p();
      if (!p || p->group != GroupKind::pp) continue;
      if (op.kind == OpKind::send) sends.insert({g.stage, ir.layout.stage_of(ir.peer_of(rank, op, true)), p->tag});
      if (op.kind == OpKind::recv) recvs.insert({ir.layout.stage_of(ir.peer_of(rank, op, false)), g.stage, p->tag});
    }
  }
  CHECK(sends == recvs);
}

std::string dump(const StepIR& ir) {
  std::ostringstream os;
  write_ir_json(os, ir);
  return os.str();
}

}  // namespace

TEST_CASE("generated graphs keep their invariants over many layouts", "[ir][structure]") {
  for (const auto& sets : kLayouts) {
    std::string label;
    for (const auto& s : sets) label += s + " ";
    INFO(label);
    const Scenario s = test::scenario_from(test::tiny_gpt(), sets);
    const StepIR ir = build_step_ir(s);
    REQUIRE(ir.stages.size() == static_cast<size_t>(s.parallel.pipeline));
    for (const StepGraph& g : ir.stages) check_graph(ir, g);
    check_transfers(ir);
  }
}

TEST_CASE("each layer runs forward and backward once per micro-batch", "[ir][structure]") {
  const Scenario s = test::scenario_from(test::tiny_gpt(), {"parallel.pipeline=2", "parallel.virtual_pipeline_stages=2",
                                                            "parallel.schedule=interleaved", "training.global_batch_size=16"});
  const StepIR ir = build_step_ir(s);
  std::map<std::tuple<int, int, int>, int> qkv;  // (layer, microbatch, phase) -> count
  for (const StepGraph& g : ir.stages)
    for (const Op& op : g.ops)
      if (std::string(op.name) == "qkv" || std::string(op.name) == "qkv_wgrad")
        ++qkv[{op.layer, op.microbatch, static_cast<int>(op.phase)}];
  const int64_t m = s.num_microbatches();
  CHECK(static_cast<int64_t>(qkv.size()) == s.model.num_layers * m * 2);
  for (const auto& [k, n] : qkv) CHECK(n == 1);
}

TEST_CASE("generation is deterministic and independent of the thread count", "[ir][structure]") {
  const Scenario s = test::scenario_from(test::tiny_gpt(), {"parallel.pipeline=4", "parallel.tensor=2",
                                                            "training.global_batch_size=8"});
  const std::string a = dump(build_step_ir(s, 1));
  CHECK(a == dump(build_step_ir(s, 1)));
  CHECK(a == dump(build_step_ir(s, 3)));
}

// `paralab inspect --dump-ir` is read by other tools: it must be JSON (string literals were
// once written unquoted), with the documented top-level keys and every op.
TEST_CASE("the IR dump is valid JSON with every op", "[ir][structure]") {
  const Scenario s = test::scenario_from(test::tiny_gpt(), {"parallel.pipeline=2", "parallel.tensor=2"});
  const StepIR ir = build_step_ir(s);
  for (const std::optional<int64_t> rank : {std::optional<int64_t>{}, std::optional<int64_t>{3}}) {
    std::ostringstream os;
    write_ir_json(os, ir, rank);
    nlohmann::json j;
    REQUIRE_NOTHROW(j = nlohmann::json::parse(os.str()));
    CHECK(j.at("format") == "paralab-ir/1");
    CHECK(j.at("rank_mapping").is_string());
    size_t ops = 0;
    for (const auto& g : j.at("graphs")) ops += g.at("ops").size();
    size_t want = 0;
    if (rank) want = ir.graph_for(*rank).ops.size();
    else
      for (const StepGraph& g : ir.stages) want += g.ops.size();
    CHECK(ops == want);
  }
}

TEST_CASE("the API answers for any rank", "[ir][structure]") {
  const Scenario s = test::scenario_from(test::tiny_gpt(), {"parallel.pipeline=2", "parallel.tensor=2"});
  const StepIR ir = build_step_ir(s);
  for (int64_t r = 0; r < ir.layout.world(); ++r) {
    const StepGraph& g = ir.graph_for(r);
    CHECK(g.stage == ir.layout.stage_of(r));
    for (const Op& op : g.ops) {
      if (op.kind == OpKind::send) {
        const int64_t peer = ir.peer_of(r, op, true);
        CHECK(ir.layout.coord(peer).tp == ir.layout.coord(r).tp);
        CHECK(ir.layout.stage_of(peer) == 1 - ir.layout.stage_of(r));
      }
      if (const auto* c = op.collective())
        CHECK(static_cast<int64_t>(ir.group_of(r, op).size()) == ir.layout.group_size(c->group));
    }
  }
}

// FP8 training quantizes the linear layers only (ModelShape::attention_math, after Transformer
// Engine's FP8 recipes): the IR's attention products, unfused and fused, say bf16, so that the
// simulator costs them at the bf16 peak, as exec/cuda runs them.
TEST_CASE("FP8: the linear GEMMs in fp8, the attention core in bf16", "[ir][structure]") {
  for (const char* attention : {"unfused", "flash"}) {
    INFO(attention);
    const Scenario s = test::scenario_from(test::tiny_gpt(), {"cluster.topology=dgx-h100", "training.precision=fp8",
                                                              std::string("training.attention=") + attention});
    const StepIR ir = build_step_ir(s);
    int linear = 0, attn = 0;
    for (const Op& op : ir.stages[0].ops) {
      if (const GemmAttrs* g = op.gemm()) {
        CHECK(g->math == (is_linear(g->role) ? MathMode::fp8 : MathMode::bf16));
        ++(is_linear(g->role) ? linear : attn);
      } else if (const AttentionAttrs* a = op.attention()) {
        CHECK(a->math == MathMode::bf16);
        ++attn;
      }
    }
    CHECK(linear > 0);
    CHECK(attn > 0);
  }
}
