// paralab tests — Megatron-LM software options that change the step's work, not the model:
// async_tensor_model_parallel_allreduce, gradient_accumulation_fusion and
// accumulate_allreduce_grads_in_fp32 (docs/config.md, docs/ir.md "Megatron-LM options").
#include <catch2/catch.hpp>

#include <map>
#include <sstream>
#include <string>

#include "ir/ir_json.hpp"
#include "ir/step_ir.hpp"
#include "test_util.hpp"

using namespace paralab;

namespace {

std::string dump(const StepIR& ir) {
  std::ostringstream os;
  write_ir_json(os, ir);
  return os.str();
}

StepIR build(std::vector<std::string> sets) {
  return build_step_ir(test::scenario_from(test::tiny_gpt(), sets));
}

// The op of `g` named `name` with the labels of `like`.
const Op* sibling(const StepGraph& g, const Op& like, const std::string& name) {
  for (const Op& op : g.ops)
    if (op.name == name && op.layer == like.layer && op.microbatch == like.microbatch && op.phase == like.phase)
      return &op;
  return nullptr;
}

bool depends_on(const Op& op, OpId d) {
  for (OpId x : op.deps)
    if (x == d) return true;
  return false;
}

}  // namespace

TEST_CASE("Megatron options at their defaults leave the graph as it was", "[ir][megatron-options]") {
  for (const std::vector<std::string>& layout :
       {std::vector<std::string>{"parallel.tensor=2"}, {"parallel.tensor=2", "parallel.sequence_parallel=true"},
        {"parallel.pipeline=2", "parallel.zero_stage=2"}}) {
    std::vector<std::string> explicit_defaults = layout;
    explicit_defaults.insert(explicit_defaults.end(), {"parallel.async_tensor_model_parallel_allreduce=true",
                                                       "training.gradient_accumulation_fusion=true",
                                                       "training.accumulate_allreduce_grads_in_fp32=false"});
    CHECK(dump(build(layout)) == dump(build(explicit_defaults)));
  }
}

// Megatron 2021 (no async TP all-reduce): autograd all-reduces a column-parallel layer's input
// gradient after the layer's backward, i.e. after the weight-gradient GEMM, and the next compute
// op waits for it. The async path overlaps them.
TEST_CASE("async_tensor_model_parallel_allreduce off: the input-gradient all-reduce follows the wgrad GEMM",
          "[ir][megatron-options]") {
  const std::map<std::string, std::string> pairs = {{"qkv_dgrad_reduce", "qkv_wgrad"},
                                                    {"fc1_dgrad_reduce", "fc1_wgrad"},
                                                    {"output_layer_dgrad_reduce", "output_layer_wgrad"}};
  for (const bool async : {true, false}) {
    INFO("async " << async);
    const StepIR ir = build({"parallel.tensor=2", std::string("parallel.async_tensor_model_parallel_allreduce=") +
                                                      (async ? "true" : "false")});
    int seen = 0;
    for (const StepGraph& g : ir.stages)
      for (const Op& op : g.ops) {
        const auto it = pairs.find(op.name);
        if (it == pairs.end() || op.kind != OpKind::collective) continue;
        const Op* w = sibling(g, op, it->second);
        REQUIRE(w);
        ++seen;
        if (async) {
          CHECK(op.id < w->id);  // issued before the GEMM, runs beside it
          CHECK_FALSE(depends_on(op, w->id));
        } else {
          CHECK(op.id > w->id);
          CHECK(depends_on(op, w->id));
        }
      }
    CHECK(seen > 0);
  }
  // With sequence parallelism the reduce-scatter overlaps either way (Megatron 2022).
  CHECK(dump(build({"parallel.tensor=2", "parallel.sequence_parallel=true"})) ==
        dump(build({"parallel.tensor=2", "parallel.sequence_parallel=true",
                    "parallel.async_tensor_model_parallel_allreduce=false"})));
}

// Without gradient-accumulation fusion every weight-gradient GEMM writes a fresh gradient and a
// separate kernel adds it (and the bias gradient) into the gradient buffer.
TEST_CASE("gradient_accumulation_fusion off: a separate add per weight gradient and micro-batch",
          "[ir][megatron-options]") {
  for (const bool fused : {true, false}) {
    INFO("fused " << fused);
    const StepIR ir = build({"parallel.tensor=2", std::string("training.gradient_accumulation_fusion=") +
                                                      (fused ? "true" : "false")});
    for (const StepGraph& g : ir.stages) {
      int wgrads = 0, biases = 0, adds = 0;
      for (const Op& op : g.ops) {
        if (const GemmAttrs* a = op.gemm(); a && a->role == GemmRole::linear_wgrad) {
          ++wgrads;
          if (a->bias) ++biases;
          CHECK(a->accumulate == fused);
          if (!fused) {
            const Op& add = g.ops[op.id + 1];  // the weight gradient's add follows its GEMM
            CHECK(add.kind == OpKind::cast);
            CHECK(std::string(add.name) == "grad_accumulate");
            CHECK(add.reads.at(0).buffer == op.writes.at(0).buffer);
            CHECK(g.buffers[add.writes.at(0).buffer].category == MemCategory::grads);
            CHECK(add.bytes == Approx(static_cast<double>(op.writes.at(0).bytes() + 2 * add.writes.at(0).bytes())));
          }
        }
        if (op.kind == OpKind::cast && std::string(op.name) == "grad_accumulate") ++adds;
      }
      CHECK(wgrads > 0);
      CHECK(adds == (fused ? 0 : wgrads + biases));
    }
  }
}

// Gradient buffers in fp32: the data-parallel reduction moves twice the bytes.
TEST_CASE("accumulate_allreduce_grads_in_fp32: fp32 gradient buffers and reductions", "[ir][megatron-options]") {
  auto reduced = [](bool fp32) {
    const StepIR ir = build({"training.precision=bf16", std::string("training.accumulate_allreduce_grads_in_fp32=") +
                                                            (fp32 ? "true" : "false")});
    double bytes = 0;
    for (const Buffer& b : ir.stages[0].buffers)
      if (b.category == MemCategory::grads) CHECK(b.dtype == (fp32 ? DType::f32 : DType::bf16));
    for (const Op& op : ir.stages[0].ops)
      if (const auto* c = op.collective(); c && c->group == GroupKind::dp) bytes += static_cast<double>(c->bytes);
    return bytes;
  };
  const double b16 = reduced(false), b32 = reduced(true);
  REQUIRE(b16 > 0);
  CHECK(b32 == Approx(2 * b16).epsilon(1e-3));
}
