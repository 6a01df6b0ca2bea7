// paralab — helpers for the engine and compute-model tests: scenarios from inline TOML, a
// network that is effectively free (for closed forms that ignore communication), and
// hand-built stage graphs wrapped into a StepIR.
#pragma once

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "ir/graph_builder.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/step_ir.hpp"
#include "sim/simulate.hpp"

namespace paralab::sim::test {

// Loads a scenario from TOML text through a temporary file (removed afterwards).
inline Scenario load_inline(const std::string& toml, const std::vector<std::string>& sets = {}) {
  static std::atomic<int> n{0};
  const auto dir = std::filesystem::temp_directory_path() /
                   ("paralab-engine-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
  std::filesystem::create_directories(dir);
  const auto file = dir / "scenario.toml";
  std::ofstream(file) << toml;
  struct Cleanup {
    std::filesystem::path d;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  } cleanup{dir};
  return load_scenario(file, sets);
}

// Sixteen wide layers with a tiny vocabulary (the embedding and the head add ~0.2 % to the
// first and last stage, so pipeline stages are equal), SGD without clipping (a short optimizer
// tail); sequences of 2,048 in bf16. `batch` is "global_batch_size = G\nmicro_batch_size = B".
inline std::string equal_layers_model(const std::string& batch) {
  return "[model]\nnum_layers = 16\nhidden_size = 4096\nnum_attention_heads = 32\nffn_hidden_size = 16384\n"
         "vocab_size = 128\nseq_length = 2048\n[training]\n" + batch +
         "\nprecision = \"bf16\"\noptimizer = \"sgd\"\nclip_grad = 0\nattention = \"flash\"\n";
}

// equal_layers_model as PP4 on one DGX A100 node: four equal stages, eight micro-batches of 8.
inline std::string four_equal_stages() {
  return equal_layers_model("global_batch_size = 64\nmicro_batch_size = 8") +
         "[parallel]\ntensor = 1\npipeline = 4\ndata = 1\n[cluster]\ntopology = \"dgx-a100\"\nnodes = 1\ndevices_per_node = 4\n";
}

// Every link a million GB/s with no latency and no call overhead: communication takes ~0.
inline void free_network(Topology& t) {
  for (LinkSpec* l : {&t.node.intra_link, &t.node.pcie, &t.node.nic, &t.network.switch_link}) {
    l->bw_gbps = 1e6;
    l->lat_us = 0;
    l->efficiency = 1;
  }
  t.collectives.launch_lat_us = 0;
  t.collectives.step_lat_us = 0;
}

// A StepIR around hand-built stage graphs (one per pipeline stage of `s`).
inline StepIR wrap(const Scenario& s, std::vector<StepGraph> stages) {
  StepIR ir{s, layout_of(s), ModelShape::from(s), std::move(stages)};
  return ir;
}

// Duration of an op in a finished simulation (rank = the stage's representative).
inline double duration_of(const StepResult& r, int64_t rank, OpId op) {
  for (const OpTiming& t : r.ops)
    if (t.rank == rank && t.op == op) return t.end_us - t.start_us;
  return -1;
}
inline const OpTiming* timing_of(const StepResult& r, int64_t rank, OpId op) {
  for (const OpTiming& t : r.ops)
    if (t.rank == rank && t.op == op) return &t;
  return nullptr;
}

// A compute op of exactly `us` microseconds: a GEMM of a shape no other test op has (taken
// from `next_shape`, which it advances) with a calibration point at that time (points
// override the model exactly).
inline OpId timed_op(Scenario& s, GraphBuilder& b, int64_t& next_shape, Stream stream, double us,
                     std::vector<TensorRef> reads = {}, std::vector<TensorRef> writes = {}, std::vector<OpId> after = {}) {
  GemmAttrs g;
  g.m = next_shape++;
  g.n = 8;
  g.k = 8;
  s.topology.calibration.gemm.push_back(GemmPoint{g.m, g.n, g.k, 1, g.math, us});
  OpSpec o;
  o.kind = OpKind::gemm;
  o.stream = stream;
  o.name = "timed";
  o.reads = std::move(reads);
  o.writes = std::move(writes);
  o.attrs = g;
  o.extra_deps = std::move(after);
  return b.add(std::move(o));
}

// A collective over `group` reading and writing `rw`, released after `after`.
inline OpId collective_op(GraphBuilder& b, paralab::CollKind kind, GroupKind group, int64_t bytes, uint32_t tag,
                          std::vector<TensorRef> rw, Stream stream, std::vector<OpId> after = {}) {
  OpSpec o;
  o.kind = OpKind::collective;
  o.stream = stream;
  o.name = "coll";
  o.reads = rw;
  o.writes = std::move(rw);
  o.attrs = paralab::CollectiveAttrs{kind, group, ReduceOp::sum, bytes, tag};
  o.extra_deps = std::move(after);
  return b.add(std::move(o));
}

// A pipeline send (to the next stage, reading `rw`) or receive (from the previous, writing it).
inline OpId p2p_op(GraphBuilder& b, bool send, int64_t bytes, uint32_t tag, std::vector<TensorRef> rw,
                   std::vector<OpId> after = {}) {
  OpSpec o;
  o.kind = send ? OpKind::send : OpKind::recv;
  o.stream = send ? Stream::pp_send : Stream::pp_recv;
  o.name = send ? "send" : "recv";
  if (send) o.reads = std::move(rw);
  else o.writes = std::move(rw);
  o.attrs = P2PAttrs{GroupKind::pp, send ? 1 : 0, send ? 0 : -1, bytes, tag, 1};
  o.extra_deps = std::move(after);
  return b.add(std::move(o));
}

// A small GPT scenario (TOML text); tests override keys with --set.
inline std::string small_gpt(int nodes = 1) {
  return "[model]\npreset = \"tiny\"\n[training]\nglobal_batch_size = 8\nmicro_batch_size = 1\n"
         "[parallel]\ntensor = 1\npipeline = 1\n[cluster]\ntopology = \"dgx-a100\"\nnodes = " +
         std::to_string(nodes) + "\n";
}

}  // namespace paralab::sim::test
