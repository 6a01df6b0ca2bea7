// tests/exec/cuda — what the CUDA backend decides without a GPU (runs in CPU-only CI):
//  * GEMM mapping: every GemmRole's cuBLAS calls (column-major, leading dimensions, strided
//    batches over the qkv layout, GQA sums, bias epilogue, bias gradient, accumulation), run
//    through a host interpreter of cuBLAS's exact semantics and compared with the CPU backend's
//    GEMMs on random matrices;
//  * communicators: one per (group, stream) slot and per pipeline edge, consistent membership on
//    every rank, every transfer on the edge that reaches its peer, and equal send/receive
//    sequences on every edge (NCCL's ordering rule) for every scenario and schedule;
//  * the cross-stream wait plan implies every IR dependency;
//  * the device fill formula equals exec/fill.hpp bit for bit;
//  * the in-process world of --gpus (barriers, splits, control reductions, gather);
//  * without a GPU: a clear error.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "../exec_test_util.hpp"
#include "exec/cuda/comm_plan.hpp"
#include "exec/cuda/cuda_backend.hpp"
#include "exec/fill_math.hpp"
#include "exec/cuda/gemm_plan.hpp"
#include "exec/cuda/thread_world.hpp"
#include "exec/error.hpp"
#include "exec/fill.hpp"

using namespace paralab;
using namespace paralab::exec;
using namespace paralab::exec::test;
namespace xc = paralab::exec::cuda;

namespace {

double rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::abs(double(got[i]) - double(want[i]));
    err = std::isnan(e) ? INFINITY : std::max(err, e);
    scale = std::max(scale, std::abs(double(want[i])));
  }
  return scale > 0 ? err / scale : err;
}

// Runs a GEMM op on the CPU backend and through its cuBLAS plan on the host; both start from the
// same (random) outputs, so accumulation and untouched columns are compared too.
void compare_gemm(CpuHarness& h, const GemmAttrs& g, std::vector<std::vector<float>> reads,
                  std::vector<std::vector<float>> writes) {
  OpHarness x;
  x.op.kind = OpKind::gemm;
  x.op.attrs = g;
  auto cpu_reads = reads;
  auto cpu_writes = writes;
  for (auto& r : cpu_reads) x.add_read(r.data(), static_cast<int64_t>(r.size()), DType::f32);
  for (auto& w : cpu_writes) x.add_write(w.data(), static_cast<int64_t>(w.size()), DType::f32);
  auto ctx = h.ctx();
  cpu::run_gemm(x.call(), ctx);

  const xc::GemmPlan plan = xc::plan_gemm(x.op, h.shape);
  std::vector<float> scratch(static_cast<size_t>(std::max<int64_t>(plan.scratch_elems, 1)), NAN);
  std::vector<float> ones(static_cast<size_t>(std::max<int64_t>(plan.ones, 1)), 1.0f);
  std::vector<float*> ops(7, nullptr);
  for (size_t i = 0; i < reads.size() && i < 3; ++i) ops[i] = reads[i].data();
  for (size_t i = 0; i < writes.size() && i < 2; ++i) ops[3 + i] = writes[i].data();
  ops[5] = scratch.data();
  ops[6] = ones.data();
  xc::run_plan_on_host(plan, ops);
  for (size_t i = 0; i < writes.size(); ++i) {
    CAPTURE(i, to_string(g.role));
    CHECK(rel_err(writes[i], cpu_writes[i]) < 1e-5);
  }
}

std::vector<float> rnd(int64_t n, uint64_t seed) { return random_floats(static_cast<size_t>(n), seed); }

}  // namespace

TEST_CASE("cuBLAS plans of linear GEMMs equal the CPU backend: transposes, bias epilogue, bias gradient, accumulate",
          "[exec][cuda][gemm]") {
  CpuHarness h;
  const int64_t m = 23, n = 17, k = 29;
  // role 3: a weight gradient without gradient-accumulation fusion (written, not accumulated,
  // bias gradient included).
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int role = 0; role < 4; ++role) {
        CAPTURE(ta, tb, role);
        GemmAttrs g;
        g.m = m, g.n = n, g.k = k, g.trans_a = ta, g.trans_b = tb;
        g.role = role == 0 ? GemmRole::linear_fwd : role == 1 ? GemmRole::linear_dgrad : GemmRole::linear_wgrad;
        g.accumulate = role == 2;
        g.bias = g.role != GemmRole::linear_dgrad;
        std::vector<std::vector<float>> reads{rnd(m * k, 1), rnd(k * n, 2)};
        std::vector<std::vector<float>> writes{rnd(m * n, 3)};
        if (g.role == GemmRole::linear_fwd) reads.push_back(rnd(n, 4));
        // Accumulated, the bias gradient adds into the main gradient; written, it goes to a fresh
        // unfilled buffer (NaN here, as --verify poisons it) that must not be read.
        if (g.role == GemmRole::linear_wgrad) writes.push_back(g.accumulate ? rnd(n, 5) : std::vector<float>(n, NAN));
        const xc::GemmPlan plan = xc::plan_gemm([&] {
          Op op;
          op.kind = OpKind::gemm;
          op.attrs = g;
          return op;
        }(), h.shape);
        REQUIRE(plan.calls.size() == (g.role == GemmRole::linear_wgrad ? 2u : 1u));
        // cuBLAS's A is the IR's B (C^T = op(B)^T op(A)^T): m and n swap, transposes swap.
        CHECK(plan.calls[0].m == n);
        CHECK(plan.calls[0].n == m);
        CHECK(plan.calls[0].trans_a == bool(tb));
        CHECK(plan.calls[0].trans_b == bool(ta));
        CHECK(plan.calls[0].beta == (g.accumulate ? 1.0f : 0.0f));
        if (plan.calls.size() > 1) CHECK(plan.calls[1].beta == plan.calls[0].beta);  // the bias gradient's
        CHECK(plan.calls[0].bias == (g.role == GemmRole::linear_fwd));
        compare_gemm(h, g, reads, writes);
      }
}

TEST_CASE("cuBLAS plans of attention GEMMs equal the CPU backend over the qkv layout, with GQA and micro-batch 2",
          "[exec][cuda][gemm]") {
  for (const auto& [name, sets] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"cpu-dp2-zero2", {"training.precision=fp32"}},                  // tiny Llama: 4 heads, 2 groups, b = 2
           {"cpu-tp2", {"training.precision=fp32"}}}) {                     // multi-head attention
    CAPTURE(name);
    CpuHarness h;
    h.scenario = scenario(name, sets);
    h.shape = ModelShape::from(h.scenario);
    const ModelShape& m = h.shape;
    const int64_t b = m.micro_batch, al = m.heads_local(), d = m.head_dim, s = m.seq_local();
    const int64_t T = s * b, qc = m.qkv_cols(), cc = m.attn_cols(), bh = b * al;
    auto gemm = [&](GemmRole role, int64_t mm, int64_t nn, int64_t kk, bool ta, bool tb) {
      GemmAttrs g;
      g.m = mm, g.n = nn, g.k = kk, g.batch = bh, g.trans_a = ta, g.trans_b = tb, g.role = role;
      return g;
    };
    compare_gemm(h, gemm(GemmRole::attn_qk, s, s, d, false, true), {rnd(T * qc, 11)}, {rnd(bh * s * s, 12)});
    compare_gemm(h, gemm(GemmRole::attn_pv, s, d, s, false, false), {rnd(bh * s * s, 13), rnd(T * qc, 14)}, {rnd(T * cc, 15)});
    compare_gemm(h, gemm(GemmRole::attn_dp, s, s, d, false, true), {rnd(T * cc, 16), rnd(T * qc, 17)}, {rnd(bh * s * s, 18)});
    // dQ, dK, dV write their columns of d_qkv (also read: the other columns must stay).
    compare_gemm(h, gemm(GemmRole::attn_dq, s, d, s, false, false), {rnd(bh * s * s, 19), rnd(T * qc, 20)}, {rnd(T * qc, 21)});
    compare_gemm(h, gemm(GemmRole::attn_dk, s, d, s, true, false), {rnd(bh * s * s, 22), rnd(T * qc, 23)}, {rnd(T * qc, 24)});
    compare_gemm(h, gemm(GemmRole::attn_dv, s, d, s, true, false), {rnd(bh * s * s, 25), rnd(T * cc, 26)}, {rnd(T * qc, 27)});
    // GQA plans a scratch and b * heads-per-group calls, each batched over the groups.
    Op op;
    op.kind = OpKind::gemm;
    op.attrs = gemm(GemmRole::attn_dv, s, d, s, true, false);
    const xc::GemmPlan p = xc::plan_gemm(op, m);
    const int64_t per = al / m.groups_local();
    CHECK(static_cast<int64_t>(p.calls.size()) == b * per);
    CHECK(p.calls[0].batch == m.groups_local());
    CHECK((p.scratch_elems > 0) == (per > 1));
  }
}

TEST_CASE("FP8 needs cuBLAS's TN layout: which operands are copied transposed", "[exec][cuda][gemm]") {
  xc::BlasCall c;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      c.trans_a = ta, c.trans_b = tb;
      const xc::Fp8Layout l = xc::fp8_layout(c);
      CHECK(l.transpose_a == !ta);  // A must end up transposed
      CHECK(l.transpose_b == bool(tb));  // B must end up not transposed
    }
}

namespace {

struct Case {
  std::string scenario;
  std::vector<std::string> sets;
};

std::vector<Case> pipeline_cases() {
  std::vector<Case> out;
  for (const char* sched : {"gpipe", "1f1b"})
    for (int pp : {2, 4})
      for (int gbs : {4, 8, 12})
        out.push_back({"cpu-pp4", {std::string("parallel.schedule=") + sched, "parallel.virtual_pipeline_stages=1",
                                   "parallel.pipeline=" + std::to_string(pp), "cluster.devices_per_node=" + std::to_string(pp),
                                   "training.global_batch_size=" + std::to_string(gbs)}});
  for (int gbs : {8, 16})
    out.push_back({"cpu-pp4", {"parallel.schedule=interleaved", "parallel.virtual_pipeline_stages=2",
                               "training.global_batch_size=" + std::to_string(gbs)}});
  for (int gbs : {4, 8})  // two stages: the ring's wrap-around edges join the same pair of ranks
    out.push_back({"cpu-pp4", {"parallel.schedule=interleaved", "parallel.virtual_pipeline_stages=2",
                               "parallel.pipeline=2", "cluster.devices_per_node=2",
                               "training.global_batch_size=" + std::to_string(gbs)}});
  for (const char* s : {"cpu-tp2-pp2-gpipe", "cpu-tp2", "cpu-cp2", "cpu-dp2-zero2", "cpu-tp2-dp2-zero3", "cpu-1rank-fp16",
                        "quickstart"})
    out.push_back({s, {}});
  return out;
}

}  // namespace

TEST_CASE("NCCL communicators: slots, pipeline edges, members and peers agree on every rank", "[exec][cuda][comm]") {
  for (const Case& c : pipeline_cases()) {
    std::optional<StepIR> built;
    try {
      built.emplace(build_step_ir(scenario(c.scenario, c.sets)));
    } catch (const std::exception& e) {
      WARN("skipping " << c.scenario << ": " << e.what());
      continue;
    }
    const StepIR& ir = *built;
    CAPTURE(c.scenario, c.sets);
    const auto specs = xc::job_nccl_comms(ir);
    const auto slots = job_comms(ir);
    size_t nslots = 0, nedges = 0;
    for (const auto& s : specs) (s.kind == xc::CommSpec::Kind::slot ? nslots : nedges)++;
    CHECK(nslots == slots.size());
    const int64_t pp = ir.layout.pp();
    CHECK(nedges == (pp > 1 ? static_cast<size_t>(2 * pp) : 0u));  // activations forward, gradients back
    // Membership: every rank of a communicator lists the same members, in the same order.
    for (size_t i = 0; i < specs.size(); ++i) {
      std::map<int64_t, std::vector<int64_t>> seen;
      for (int64_t r = 0; r < ir.layout.world(); ++r) {
        const auto mem = xc::comm_members(ir, specs[i], r);
        if (mem.empty()) continue;
        CHECK(std::find(mem.begin(), mem.end(), r) != mem.end());
        for (int64_t x : mem) {
          if (seen.count(x)) CHECK(seen[x] == mem);
          seen[x] = mem;
        }
        if (specs[i].kind == xc::CommSpec::Kind::edge) CHECK(mem.size() == 2u);
      }
    }
    // Every transfer's communicator reaches the peer the IR names.
    for (int64_t r = 0; r < ir.layout.world(); ++r) {
      const RankPlan p = plan_rank(ir, r, false);
      const auto oc = xc::plan_op_comms(p, specs);
      for (const Op& op : p.graph->ops) {
        if (!is_comm(op.kind)) {
          CHECK(oc[op.id].comm == -1);
          continue;
        }
        REQUIRE(oc[op.id].comm >= 0);
        const auto mem = xc::comm_members(ir, specs[static_cast<size_t>(oc[op.id].comm)], r);
        REQUIRE(!mem.empty());
        if (op.kind == OpKind::send || op.kind == OpKind::sendrecv) {
          REQUIRE(oc[op.id].send_peer >= 0);
          CHECK(mem[static_cast<size_t>(oc[op.id].send_peer)] == ir.peer_of(r, op, true));
        }
        if (op.kind == OpKind::recv || op.kind == OpKind::sendrecv) {
          REQUIRE(oc[op.id].recv_peer >= 0);
          CHECK(mem[static_cast<size_t>(oc[op.id].recv_peer)] == ir.peer_of(r, op, false));
        }
        if (op.kind == OpKind::collective) CHECK(mem == ir.group_of(r, op));
      }
    }
    // NCCL's order rule on every edge: the sender's sends and the receiver's receives agree.
    CHECK_NOTHROW(xc::check_p2p_order(ir));
  }
}

TEST_CASE("an edge whose receives come in another order than its sends is refused, naming the edge", "[exec][cuda][comm]") {
  StepIR ir = build_step_ir(scenario("cpu-tp2-pp2-gpipe"));
  // Swap the tags of the first two activation receives of stage 1.
  std::vector<Op*> recvs;
  for (Op& op : ir.stages[1].ops)
    if (op.kind == OpKind::recv && op.p2p()->recv_offset == -1) recvs.push_back(&op);
  REQUIRE(recvs.size() >= 2);
  std::swap(std::get<P2PAttrs>(recvs[0]->attrs).tag, std::get<P2PAttrs>(recvs[1]->attrs).tag);
  try {
    xc::check_p2p_order(ir);
    FAIL("expected an error");
  } catch (const ExecError& e) {
    CHECK_THAT(e.what(), Catch::Contains("different orders") && Catch::Contains("pp transfers from rank"));
  }
}

TEST_CASE("the cross-stream wait plan implies every IR dependency and drops redundant waits", "[exec][cuda][streams]") {
  int64_t total_deps = 0, total_kept = 0;
  for (const Case& c : pipeline_cases()) {
    std::optional<StepIR> built;
    try {
      built.emplace(build_step_ir(scenario(c.scenario, c.sets)));
    } catch (const std::exception&) {
      continue;
    }
    for (const StepGraph& g : built->stages) {
      CAPTURE(c.scenario, g.stage);
      const xc::WaitPlan w = xc::plan_waits(g);
      // Replay the GPU's ordering from the kept waits only: per op, the last position of each
      // stream known complete when it completes.
      std::vector<int64_t> pos(g.ops.size());
      for (const auto& st : g.streams)
        for (size_t i = 0; i < st.size(); ++i) pos[st[i]] = static_cast<int64_t>(i);
      std::vector<std::array<int64_t, kStreams>> done(g.ops.size());
      std::array<OpId, kStreams> last;
      last.fill(kNoOp);
      for (const Op& op : g.ops) {
        const auto s = static_cast<size_t>(op.stream);
        std::array<int64_t, kStreams> cur;
        cur.fill(-1);
        if (last[s] != kNoOp) cur = done[last[s]];
        for (OpId d : w.waits[op.id]) {
          CHECK(std::find(op.deps.begin(), op.deps.end(), d) != op.deps.end());  // only IR deps
          for (int t = 0; t < kStreams; ++t) cur[static_cast<size_t>(t)] = std::max(cur[static_cast<size_t>(t)], done[d][static_cast<size_t>(t)]);
        }
        for (OpId d : op.deps) {  // every dependency is complete before the op starts
          const auto x = static_cast<size_t>(g.op(d).stream);
          if (x != s) CHECK(pos[d] <= cur[x]);
        }
        cur[s] = pos[op.id];
        done[op.id] = cur;
        last[s] = op.id;
      }
      total_deps += w.ir_deps;
      total_kept += w.kept;
    }
  }
  CHECK(total_kept < total_deps);  // some waits are implied by others
}

TEST_CASE("device fill values equal exec/fill.hpp bit for bit", "[exec][cuda][fill]") {
  for (Fill f : {Fill::weights, Fill::moment1, Fill::moment2}) {
    const int kind = f == Fill::weights ? 0 : f == Fill::moment1 ? 1 : 2;
    for (uint64_t key : {0ull, 12345ull, 0xDEADBEEFCAFEull})
      for (int64_t i = 0; i < 20000; i += 7) {
        const float a = fill_value(f, key, i), b = paralab::exec::fillmath::fill_value(kind, key, i);
        uint32_t ua, ub;
        std::memcpy(&ua, &a, 4);
        std::memcpy(&ub, &b, 4);
        REQUIRE(ua == ub);
      }
  }
  for (int64_t i = 0; i < 5000; ++i) REQUIRE(token_id(99, i, 50257) == paralab::exec::fillmath::token_id(99, i, 50257));
}

TEST_CASE("device parameter values equal exec/fill.hpp's param_value bit for bit, every split", "[exec][cuda][fill]") {
  for (int split = 0; split <= 4; ++split)
    for (bool gain : {false, true}) {
      ParamRegion r;
      r.rows = 5;
      r.split = static_cast<ParamSplit>(split);
      r.gain = gain;
      r.key = 0xABCDEF12345ull + static_cast<uint64_t>(split);
      r.tp = 1;
      r.tp_size = 2;
      r.heads = 2, r.groups = 1, r.head_dim = 4;  // qkv_cols: 2 heads + 2 x 1 group of 4 = 16 columns
      r.ffn = 6;                                  // swiglu_cols: 12 columns
      r.cols = split == 3 ? 16 : split == 4 ? 12 : 9;
      paralab::exec::fillmath::ParamGeo g;
      g.rows = r.rows, g.cols = r.cols, g.tp = r.tp, g.tp_size = r.tp_size, g.heads = r.heads, g.groups = r.groups;
      g.head_dim = r.head_dim, g.ffn = r.ffn, g.key = r.key, g.split = split, g.gain = gain ? 1 : 0;
      CAPTURE(split, gain);
      for (int64_t i = 0; i < r.rows; ++i)
        for (int64_t j = 0; j < r.cols; ++j) {
          const float a = param_value(r, i, j), b = paralab::exec::fillmath::param_value(g, i, j);
          uint32_t ua, ub;
          std::memcpy(&ua, &a, 4);
          std::memcpy(&ub, &b, 4);
          REQUIRE(ua == ub);
        }
    }
}

TEST_CASE("the in-process world of --gpus: barrier, splits, control reductions, gather", "[exec][cuda][threads]") {
  const int n = 4;
  auto worlds = xc::make_thread_worlds(n);
  std::vector<std::string> gathered;
  std::vector<int64_t> sums(n), maxes(n), group_sums(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      Transport& w = *worlds[static_cast<size_t>(r)];
      CHECK(w.rank() == r);
      CHECK(w.size() == n);
      w.barrier();
      for (int round = 0; round < 50; ++round) {  // repeated rounds never mix
        int64_t v[2] = {r + round, r * 10 + round};
        w.all_reduce(v, 2, ReduceOp::sum);
        CHECK(v[0] == 6 + 4 * round);
        CHECK(v[1] == 60 + 4 * round);
      }
      int64_t m = r * 3;
      w.all_reduce(&m, 1, ReduceOp::max);
      maxes[static_cast<size_t>(r)] = m;
      // Two groups of two, then a group that leaves rank 3 out.
      const std::vector<int64_t> members = r % 2 == 0 ? std::vector<int64_t>{0, 2} : std::vector<int64_t>{1, 3};
      auto g = w.split(static_cast<int>(members[0]), r / 2, members, "pairs");
      REQUIRE(g);
      CHECK(g->index() == r / 2);
      int64_t x = 100 + r;
      g->control_all_reduce(&x, 1, ReduceOp::sum);
      group_sums[static_cast<size_t>(r)] = x;
      auto h = w.split(r < 3 ? 0 : -1, r, r < 3 ? std::vector<int64_t>{0, 1, 2} : std::vector<int64_t>{}, "three");
      CHECK((h != nullptr) == (r < 3));
      if (h) {
        int64_t y = r;
        h->control_all_reduce(&y, 1, ReduceOp::sum);
        CHECK(y == 3);
      }
      const auto all = w.gather_to_root("rank" + std::to_string(r));
      if (r == 0) gathered = all;
      else CHECK(all.empty());
    });
  for (auto& t : threads) t.join();
  CHECK(gathered == std::vector<std::string>{"rank0", "rank1", "rank2", "rank3"});
  CHECK(maxes == std::vector<int64_t>{9, 9, 9, 9});
  CHECK(group_sums == std::vector<int64_t>{202, 204, 202, 204});
}

TEST_CASE("without a GPU the cuda backend fails with a clear error", "[exec][cuda][errors]") {
  std::string why;
  int count = 0;
  if (xc::cuda_available(&why, &count)) {
    SUCCEED("a GPU is present (" << count << " devices): the no-device path is not exercised here");
    return;
  }
  CHECK_THAT(why, Catch::Contains("needs a CUDA GPU") && Catch::Contains("--backend cpu"));
  const StepIR ir = build_step_ir(scenario("cpu-1rank-fp16"));
  const RankPlan p = plan_rank(ir, 0, false);
  auto world = make_self_transport();
  auto backend = make_cuda_backend(ir);
  CHECK(backend->name() == "cuda");
  CHECK_FALSE(backend->synchronous());
  try {
    backend->setup(p, *world);
    FAIL("setup without a GPU succeeded");
  } catch (const ExecError& e) {
    CHECK(e.rank() == 0);
    CHECK_THAT(e.cause(), Catch::Contains("needs a CUDA GPU"));
  }
  CHECK_THROWS_AS(xc::run_rank_threads(2, [](Transport&) { return 0; }), ExecError);
}
