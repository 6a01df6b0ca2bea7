// paralab — the simulator on generated scenarios against closed forms: the 1F1B pipeline bubble
// and its reduction by interleaving, ZeRO-3's communication volume against DDP's, and
// bit-identical results (repeat runs, IR built on several threads, simulations in parallel).
#include <catch2/catch.hpp>

#include <algorithm>
#include <thread>

#include "engine_test_util.hpp"
#include "results/result_io.hpp"

using namespace paralab;
using namespace paralab::sim;
using namespace paralab::sim::test;

namespace {

// Four equal pipeline stages of four layers each (four_equal_stages): the vocabulary is tiny and
// the layers wide, so the embedding and the head add ~0.2 % to the first and last stage; SGD
// without clipping keeps the optimizer tail short.
struct PipelineRun {
  double bubble_fraction = 0;
  double t_mb_us = 0;  // slowest stage's compute time for one micro-batch (forward + backward)
  int64_t p = 0, m = 0, v = 1;
};

PipelineRun run_pipeline(const std::vector<std::string>& sets) {
  std::vector<std::string> all = {"topology.node.devices_per_node=4"};
  all.insert(all.end(), sets.begin(), sets.end());
  Scenario s = load_inline(four_equal_stages(), all);
  free_network(s.topology);
  const StepIR ir = build_step_ir(s);
  const StepResult r = simulate(ir).result;
  PipelineRun out;
  out.bubble_fraction = r.bubble_fraction;
  out.p = s.parallel.pipeline;
  out.m = s.num_microbatches();
  out.v = s.parallel.virtual_pipeline_stages;
  for (int64_t st = 0; st < out.p; ++st) {
    const StepGraph& g = ir.stages[static_cast<size_t>(st)];
    const int64_t rank = ir.layout.representative(st);
    double t = 0;
    for (const OpTiming& ot : r.ops) {
      if (ot.rank != rank) continue;
      const Op& op = g.op(ot.op);
      if (op.stream == Stream::compute && op.microbatch == 0 && op.phase != Phase::optimizer) t += ot.end_us - ot.start_us;
    }
    out.t_mb_us = std::max(out.t_mb_us, t);
  }
  return out;
}

}  // namespace

// Narayanan et al. 2021, Sec. 2.2.1: with p equal stages and m micro-batches the 1F1B
// (PipeDream-Flush) bubble is (p-1) stage times out of (m+p-1): fraction (p-1)/(m+p-1).
TEST_CASE("closed form: 1F1B bubble fraction (p-1)/(m+p-1)", "[engine][closed-form]") {
  const PipelineRun r = run_pipeline({"parallel.schedule=1f1b"});
  REQUIRE(r.p == 4);
  REQUIRE(r.m == 8);
  const double expected = static_cast<double>(r.p - 1) / static_cast<double>(r.m + r.p - 1);
  CHECK(r.bubble_fraction == Approx(expected).epsilon(0.01));
  CHECK(r.t_mb_us > 10'000);  // the stages do real work (tens of ms per micro-batch)
}

// Ibid., Sec. 2.2.2: interleaving v model chunks per stage divides the bubble time by v:
// (p-1)/v stage times out of m + (p-1)/v.
TEST_CASE("closed form: interleaving divides the bubble by the virtual stages", "[engine][closed-form]") {
  const PipelineRun one = run_pipeline({"parallel.schedule=1f1b"});
  const PipelineRun r = run_pipeline({"parallel.schedule=interleaved", "parallel.virtual_pipeline_stages=2"});
  REQUIRE(r.v == 2);
  const double pv = static_cast<double>(r.p - 1) / static_cast<double>(r.v);
  const double expected = pv / (static_cast<double>(r.m) + pv);
  CHECK(r.bubble_fraction == Approx(expected).epsilon(0.01));
  // Bubble time (fraction x step) halves: compare in units of the per-micro-batch stage time.
  const double bubble_1 = one.bubble_fraction / (1 - one.bubble_fraction) * static_cast<double>(one.m);
  const double bubble_2 = r.bubble_fraction / (1 - r.bubble_fraction) * static_cast<double>(r.m);
  CHECK(bubble_2 == Approx(bubble_1 / 2).epsilon(0.02));
}

// Rajbhandari et al. 2020 (ZeRO), Sec. 7.2.2: ZeRO-3 communicates 3 Psi per step (parameter
// all-gather in the forward and in the backward pass, gradient reduce-scatter) against DDP's
// 2 Psi (all-reduce = reduce-scatter + all-gather): 1.5x. Measured on the network model's byte
// counters, one micro-batch (ZeRO-3 gathers again for every micro-batch).
TEST_CASE("closed form: ZeRO-3 moves 1.5x the bytes of DDP", "[engine][closed-form]") {
  auto bytes = [](int zero) {
    const Scenario s = load_inline(small_gpt(), {"parallel.zero_stage=" + std::to_string(zero), "training.precision=bf16",
                                                 "training.global_batch_size=8", "model.num_layers=4",
                                                 "model.hidden_size=512", "model.num_attention_heads=8",
                                                 "model.ffn_hidden_size=2048"});
    REQUIRE(s.num_microbatches() == 1);
    REQUIRE(s.parallel.data == 8);
    const Simulation sim = simulate(build_step_ir(s));
    double total = 0;
    for (double b : sim.network.link_bytes) total += b;
    return total;
  };
  const double ddp = bytes(0), zero3 = bytes(3);
  REQUIRE(ddp > 0);
  CHECK(zero3 / ddp == Approx(1.5).epsilon(0.01));
}

namespace {
// A layout that exercises every kind of call: TP with sequence parallelism, PP interleaved,
// DP with the distributed optimizer, context parallelism, across two nodes.
Scenario busy_layout() {
  return load_inline(small_gpt(2), {"parallel.tensor=2", "parallel.pipeline=2", "parallel.context=2",
                                    "parallel.sequence_parallel=true", "parallel.schedule=interleaved",
                                    "parallel.virtual_pipeline_stages=2", "parallel.zero_stage=1",
                                    "training.global_batch_size=16", "training.precision=fp16"});
}

void check_identical(const StepResult& a, const StepResult& b) {
  REQUIRE(a.ops.size() == b.ops.size());
  size_t differing = 0;
  for (size_t i = 0; i < a.ops.size(); ++i)
    if (a.ops[i].rank != b.ops[i].rank || a.ops[i].op != b.ops[i].op || a.ops[i].start_us != b.ops[i].start_us ||
        a.ops[i].end_us != b.ops[i].end_us)
      ++differing;
  CHECK(differing == 0);
  nlohmann::json ja = summary_json(a), jb = summary_json(b);
  for (auto* j : {&ja, &jb}) {
    j->erase("sim_wall_s");
    j->erase("wall_s");
  }
  CHECK(ja.dump() == jb.dump());
}
}  // namespace

TEST_CASE("determinism: the same input gives bit-identical results", "[engine][determinism]") {
  const Scenario s = busy_layout();
  REQUIRE(s.parallel.data == 2);
  const StepIR ir = build_step_ir(s);
  const StepResult a = simulate(ir).result;
  const StepResult b = simulate(ir).result;
  check_identical(a, b);
  CHECK(a.events > 0);

  SECTION("an IR built on 4 threads simulates identically") {
    check_identical(a, simulate(build_step_ir(s, 4)).result);
  }
  SECTION("simulations running on 4 threads at once are identical") {
    std::vector<StepResult> rs(4);
    std::vector<std::thread> pool;
    for (size_t i = 0; i < rs.size(); ++i) pool.emplace_back([&, i] { rs[i] = simulate(ir).result; });
    for (auto& t : pool) t.join();
    for (const StepResult& r : rs) check_identical(a, r);
  }
}

// DGX H800 (topologies/dgx-h800.toml, DeepSeek-V3's cluster): NVLink at 200 GB/s per direction
// against the H100's 450, the same 0.8 efficiency and latency, so a bandwidth-bound all-reduce
// inside a node takes 450 / 200 = 2.25 times as long; its compute (forward GEMMs) is the H100's.
TEST_CASE("closed form: DGX H800's NVLink makes a node's all-reduce 2.25x a DGX H100's", "[engine][closed-form]") {
  auto run = [](const char* topo) {
    const Scenario s = load_inline(std::string("[model]\npreset = \"gpt-1.7b\"\n[training]\nglobal_batch_size = 8\n"
                                               "[parallel]\ntensor = 1\n[cluster]\ntopology = \"") + topo + "\"\n");
    const StepIR ir = build_step_ir(s);
    const StepResult r = simulate(ir).result;
    double reduce_us = 0, compute_us = 0;
    for (const OpTiming& ot : r.ops) {
      if (ot.rank != 0) continue;
      const Op& op = ir.stages[0].op(ot.op);
      if (const auto* c = op.collective(); c && c->group == GroupKind::dp && c->kind == paralab::CollKind::all_reduce)
        reduce_us = std::max(reduce_us, ot.end_us - ot.start_us);  // the largest bucket's
      // Forward GEMMs: nothing communicates beside them (gradient reductions overlap the
      // backward, where NCCL's SMs slow compute for as long as they run).
      if (op.kind == OpKind::gemm && op.phase == Phase::forward) compute_us += ot.end_us - ot.start_us;
    }
    return std::pair{reduce_us, compute_us};
  };
  const auto [h800_reduce, h800_gemm] = run("dgx-h800");
  const auto [h100_reduce, h100_gemm] = run("dgx-h100");
  REQUIRE(h100_reduce > 0);
  CHECK(h800_reduce / h100_reduce == Approx(450.0 / 200.0).epsilon(0.03));
  CHECK(h800_gemm == Approx(h100_gemm).epsilon(1e-9));
}

// Interleaving with micro-batch counts that are not a multiple of the pipeline (Megatron-LM's
// microbatch_group_size_per_vp_stage): every combination Megatron accepts runs to completion
// (activations and gradients travel on their own streams, so neither direction waits behind the
// other), and the bubble stays below 1F1B's for the same micro-batches.
TEST_CASE("interleaving with micro-batch groups completes for every group Megatron accepts", "[engine][schedule]") {
  for (int64_t m = 4; m <= 13; ++m)
    for (int64_t g = 4; g <= m; ++g) {
      if (m % g != 0 && m % g < 4) continue;
      INFO("m = " << m << ", group = " << g);
      const PipelineRun i = run_pipeline({"parallel.schedule=interleaved", "parallel.virtual_pipeline_stages=2",
                                          "training.global_batch_size=" + std::to_string(8 * m),
                                          "parallel.microbatch_group_size_per_vp_stage=" + std::to_string(g)});
      const PipelineRun o = run_pipeline({"parallel.schedule=1f1b", "training.global_batch_size=" + std::to_string(8 * m)});
      CHECK(i.m == m);
      CHECK(i.bubble_fraction < o.bubble_fraction);
    }
}
