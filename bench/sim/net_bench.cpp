// paralab — network model micro-benchmark: one training step's communication on a 1,024-GPU
// and a 16,384-GPU cluster, driven by a minimal stand-in for the event engine.
//
// Per pipeline stage (one representative rank each, as the engine does) a script of blocking
// compute + tensor-parallel all-reduces (2 per layer forward, 2 backward, Megatron without
// sequence parallelism), asynchronous pipeline sends after each micro-batch's forward and
// backward, and the data-parallel gradient buckets' all-reduces issued asynchronously during
// the last backward (Megatron's overlap_grad_reduce), on per-stage FIFO streams. Stages run concurrently from t = 0 (the
// pipeline's own dependencies are the engine's business, not the network's). Every call goes
// through NetworkModel: patterns, symmetric copies, max-min re-solves. Prints wall time,
// flows/s and re-solves/s. Topologies: topologies/dgx-a100.toml and dgx-h100.toml (built-in
// stand-ins if they cannot be loaded). Usage: paralab_net_bench [gpt3|llama3|all] [dense|burst]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <limits>
#include <queue>
#include <string>
#include <vector>

#include "ir/layout.hpp"
#include "ir/topology.hpp"
#include "ir/topology_loader.hpp"
#include "sim/net/network_model.hpp"

using namespace paralab;
using namespace paralab::sim;

namespace {

struct Config {
  const char* name;
  Topology topo;
  int64_t tp, pp, dp, nodes;
  int64_t microbatches, layers_per_stage;
  int64_t act_bytes;      // one micro-batch's hidden states: seq * mb * hidden * 2 (bf16)
  int64_t grad_bytes;     // a stage's gradients per GPU (bf16)
  int64_t bucket_bytes;   // dp_bucket_mb
  double fwd_layer_us;    // compute between two TP all-reduces (forward half-layer)
};

Topology a100_cluster() {
  // DGX A100: NVLink3 300 GB/s per GPU per direction through NVSwitch, 8 x HDR 200 Gb/s
  // (25 GB/s) NICs behind PCIe Gen4 switches, fat tree of 40-port HDR switches (QM8790).
  Topology t;
  t.name = "dgx-a100 (bench)";
  t.node.devices_per_node = 8;
  t.node.intra_link = LinkSpec{300, 3.0, 0.8};
  t.node.pcie = LinkSpec{25, 1.0, 0.9};
  t.node.nics_per_node = 8;
  t.node.nic = LinkSpec{25, 1.5, 0.9};
  t.network.kind = NetworkKind::fat_tree;
  t.network.levels = 3;
  t.network.radix = 40;
  t.network.switch_link = LinkSpec{25, 0.6, 0.9};
  return t;
}

Topology h100_cluster() {
  // DGX H100: NVLink4 450 GB/s per direction, 8 x NDR 400 Gb/s (50 GB/s) NICs, PCIe Gen5,
  // 3-tier fat tree of 64-port NDR switches (QM9700).
  Topology t = a100_cluster();
  t.name = "dgx-h100 (bench)";
  t.node.intra_link = LinkSpec{450, 2.5, 0.8};
  t.node.pcie = LinkSpec{50, 1.0, 0.9};
  t.node.nic = LinkSpec{50, 1.5, 0.9};
  t.network.radix = 64;
  t.network.switch_link = LinkSpec{50, 0.6, 0.9};
  return t;
}

// The shipped topology file when it loads, else the built-in stand-in above.
Topology shipped_or(const char* name, Topology fallback) {
  try {
    return load_topology(data_dir() / "topologies" / (std::string(name) + ".toml"));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "note: topologies/%s.toml not loaded (%s); using built-in values\n",
                 name, e.what());
    return fallback;
  }
}

// One stage's script: ops run in order; `blocking` ops hold the stage until they finish.
// stream 0 is the compute stream (its calls block the script, like TP all-reduces on the
// critical path); 1 (pp-comm) and 2 (dp-comm) are FIFO side streams: a call there waits for
// the previous call on the same stream, as NCCL calls on one stream do.
struct Op {
  enum Kind : uint8_t { compute, comm } kind;
  int stream;
  double dur_us;
  CommRequest req;
};

std::vector<Op> stage_script(const Config& c, const Layout& layout, int64_t stage) {
  std::vector<Op> ops;
  const int64_t rep = layout.representative(stage);
  const auto tp_members = layout.members(GroupKind::tp, rep);
  const auto dp_members = layout.members(GroupKind::dp, rep);
  auto tp_ar = [&] {
    return Op{Op::comm, 0, 0,
              CommRequest{sim::CollKind::all_reduce, CollectiveAlgo::automatic, GroupKind::tp,
                          tp_members, c.act_bytes, true}};
  };
  auto send = [&](int64_t to_stage) {
    const int64_t dst = layout.representative(to_stage);
    return Op{Op::comm, 1, 0,
              CommRequest{sim::CollKind::p2p, CollectiveAlgo::automatic, GroupKind::pp, {rep, dst},
                          c.act_bytes / c.tp, true}};
  };
  const int64_t buckets = (c.grad_bytes + c.bucket_bytes - 1) / c.bucket_bytes;
  int64_t issued = 0;
  for (int64_t mb = 0; mb < c.microbatches; ++mb) {
    for (int64_t l = 0; l < c.layers_per_stage; ++l)
      for (int half = 0; half < 2; ++half) {
        ops.push_back(Op{Op::compute, 0, c.fwd_layer_us, {}});
        ops.push_back(tp_ar());
      }
    if (stage + 1 < c.pp) ops.push_back(send(stage + 1));
    const bool last = mb + 1 == c.microbatches;
    for (int64_t l = 0; l < c.layers_per_stage; ++l) {
      for (int half = 0; half < 2; ++half) {
        ops.push_back(Op{Op::compute, 0, 2 * c.fwd_layer_us, {}});
        ops.push_back(tp_ar());
      }
      // Gradient buckets become ready as the last backward walks down the layers.
      const int64_t ready = last ? buckets * (l + 1) / c.layers_per_stage : 0;
      for (; issued < ready; ++issued)
        ops.push_back(Op{Op::comm, 2, 0,
                         CommRequest{sim::CollKind::all_reduce, CollectiveAlgo::automatic,
                                     GroupKind::dp, dp_members, c.bucket_bytes, true}});
    }
    if (stage > 0) ops.push_back(send(stage - 1));
  }
  return ops;
}

struct Result {
  double wall_s = 0, sim_us = 0;
  CommStats stats;
};

Result run(const Config& c, bool burst) {
  const Layout layout(c.tp, 1, c.dp, c.pp, c.topo.node.devices_per_node);
  std::vector<std::vector<Op>> scripts;
  for (int64_t s = 0; s < c.pp; ++s) scripts.push_back(stage_script(c, layout, s));

  const auto t0 = std::chrono::steady_clock::now();
  NetworkModel net(c.topo, layout);
  struct Stage {
    size_t pc = 0;
    uint64_t waiting = 0;               // handle of the blocking call, 0 if none
    std::deque<const Op*> queued[2];    // side streams 1 and 2
    uint64_t busy[2] = {0, 0};          // their running call, 0 if idle
  };
  std::vector<Stage> st(static_cast<size_t>(c.pp));
  std::vector<int64_t> owner;  // handle -> stage
  using Ev = std::pair<double, int64_t>;
  std::priority_queue<Ev, std::vector<Ev>, std::greater<>> compute;  // (end time, stage)
  double now = 0;
  auto launch = [&](int64_t s, const Op& op) {
    const uint64_t h = net.start(op.req, now);
    if (owner.size() <= h) owner.resize(h + 1, -1);
    owner[h] = s;
    return h;
  };
  auto pump = [&](int64_t s, int k) {  // start the next queued call of side stream k
    Stage& x = st[static_cast<size_t>(s)];
    if (x.queued[k].empty()) return;
    if (burst) {  // every queued call at once: no stream order (worst case for the solver)
      for (const Op* op : x.queued[k]) launch(s, *op);
      x.queued[k].clear();
      return;
    }
    if (x.busy[k] != 0) return;
    x.busy[k] = launch(s, *x.queued[k].front());
    x.queued[k].pop_front();
  };
  // Issue ops from the stage's script until one blocks.
  auto step = [&](int64_t s) {
    Stage& x = st[static_cast<size_t>(s)];
    auto& ops = scripts[static_cast<size_t>(s)];
    while (x.pc < ops.size()) {
      const Op& op = ops[x.pc++];
      if (op.kind == Op::compute) {
        compute.push({now + op.dur_us, s});
        return;
      }
      if (op.stream == 0) {
        x.waiting = launch(s, op);
        return;
      }
      x.queued[op.stream - 1].push_back(&op);
      pump(s, op.stream - 1);
    }
  };
  for (int64_t s = 0; s < c.pp; ++s) step(s);
  std::vector<uint64_t> fin;
  for (;;) {
    const double tn = net.next_completion_us();
    const double tc = compute.empty() ? std::numeric_limits<double>::infinity()
                                      : compute.top().first;
    if (tn == std::numeric_limits<double>::infinity() && compute.empty()) break;
    if (tc <= tn) {
      now = tc;
      const int64_t s = compute.top().second;
      compute.pop();
      step(s);
      continue;
    }
    now = tn;
    fin.clear();
    net.advance(tn, fin);
    for (uint64_t h : fin) {
      const int64_t s = owner[h];
      Stage& x = st[static_cast<size_t>(s)];
      if (x.waiting == h) {
        x.waiting = 0;
        step(s);
      }
      for (int k = 0; k < 2; ++k)
        if (x.busy[k] == h) {
          x.busy[k] = 0;
          pump(s, k);
        }
    }
  }
  Result r;
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.sim_us = now;
  r.stats = net.stats();
  return r;
}

void report(const Config& c, const std::string& mode) {
  const Result r = run(c, mode == "burst");
  const CommStats& s = r.stats;
  std::printf("## %s%s\n", c.name,
              mode == "dense"   ? " (dense: no compute between calls)"
              : mode == "burst" ? " (burst: side-stream calls all in flight at once)"
                                : "");
  std::printf("cluster: %lld GPUs (%lld nodes), TP%lld PP%lld DP%lld, %lld micro-batches, %s\n",
              static_cast<long long>(c.tp * c.pp * c.dp), static_cast<long long>(c.nodes),
              static_cast<long long>(c.tp), static_cast<long long>(c.pp),
              static_cast<long long>(c.dp), static_cast<long long>(c.microbatches),
              c.topo.name.c_str());
  std::printf("calls %llu (ring %llu, tree %llu, direct %llu), flows %llu, patterns %llu, "
              "routes %llu\n",
              (unsigned long long)s.calls, (unsigned long long)s.calls_by_algo[0],
              (unsigned long long)s.calls_by_algo[1], (unsigned long long)s.calls_by_algo[3],
              (unsigned long long)s.flows, (unsigned long long)s.patterns,
              (unsigned long long)s.routes);
  std::printf("re-solves %llu (at %llu timestamps), solver work %llu link-loads\n",
              (unsigned long long)s.resolves, (unsigned long long)s.settles,
              (unsigned long long)s.solver_work);
  std::printf("simulated step (communication-bound stand-in) %.3f s\n", r.sim_us * 1e-6);
  std::printf("wall %.3f s: %.0f calls/s, %.0f flows/s, %.0f re-solves/s\n\n", r.wall_s,
              static_cast<double>(s.calls) / r.wall_s, static_cast<double>(s.flows) / r.wall_s,
              static_cast<double>(s.resolves) / r.wall_s);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "all";
  // "dense": no compute between calls, every stage's communication back to back.
  // "burst": side-stream calls are not serialized: all of a stage's gradient buckets run at
  // once (unrealistic for NCCL, the worst case for the solver: huge connected components).
  const std::string mode = argc > 2 ? argv[2] : "";
  // GPT-3 175B (96 layers, hidden 12288, seq 2048, mb 1) on 1,024 A100s: TP8 PP16 DP8, global
  // batch 1024 -> 128 micro-batches per pipeline; 175e9 / 128 model-parallel ranks params.
  const Config gpt3{"GPT-3 175B, 1,024 GPUs", shipped_or("dgx-a100", a100_cluster()), 8, 16, 8, 128, 128, 6,
                    2048LL * 12288 * 2, 175'000'000'000LL / 128 * 2, 25LL << 20, 3000.0};
  // Llama-3 405B (126 layers -> 8 per stage, hidden 16384, seq 8192) on 16,384 H100s:
  // TP8 PP16 DP128, 16M-token batch -> 16 micro-batches per pipeline.
  const Config llama{"Llama-3 405B, 16,384 GPUs", shipped_or("dgx-h100", h100_cluster()), 8, 16, 128, 2048, 16, 8,
                     8192LL * 16384 * 2, 405'000'000'000LL / 128 * 2, 25LL << 20, 12000.0};
  for (Config c : {gpt3, llama}) {
    if (which != "all" && which != (c.tp * c.pp * c.dp == 1024 ? "gpt3" : "llama3")) continue;
    if (mode == "dense") c.fwd_layer_us = 0;
    report(c, mode);
  }
  return 0;
}
