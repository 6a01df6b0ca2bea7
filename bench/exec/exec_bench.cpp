// paralab exec benchmark — what the CPU executor's ops cost on this machine:
//   paralab_exec_bench gemm                 GEMM throughput (the backend's own GEMM path, fp32 and
//                                           bf16 storage) on the quickstart model's shapes
//   mpirun -np N paralab_exec_bench comm    collectives and ring transfers through the executor's
//                                           MPI transport (nonblocking, polled), 4 KiB .. 16 MiB
// Times are medians of repeated runs. Never used by tests (no timed assertions anywhere).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "exec/cpu/cpu_math.hpp"
#include "exec/plan.hpp"
#if defined(PARALAB_EXEC_MPI)
#include "exec/mpi/mpi_transport.hpp"
#endif

using namespace paralab;
using namespace paralab::exec;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class F>
double median_time(F&& f, int reps) {
  std::vector<double> t;
  f();  // warm up
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_s();
    f();
    t.push_back(now_s() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

class NoWait final : public WaitPolicy {
 public:
  void check(double) const override {}
};

void bench_gemm() {
  // Quickstart (scenarios/quickstart.toml) per TP rank: T = 2 x 256 tokens, h = 512, 4 local
  // heads, ffn/2 = 1024, vocab/2 = 4096.
  struct Shape {
    const char* name;
    int64_t m, n, k;
    bool ta, tb;
  };
  const Shape shapes[] = {
      {"qkv      [T,h] x [h,3h/2]", 512, 768, 512, false, false},
      {"fc1      [T,h] x [h,f/2]", 512, 1024, 512, false, false},
      {"fc2      [T,f/2] x [f/2,h]", 512, 512, 1024, false, false},
      {"fc1 dgrad  dY W^T", 512, 512, 1024, false, true},
      {"fc1 wgrad  X^T dY", 512, 1024, 512, true, false},
      {"logits   [T,h] x [V/2,h]^T", 512, 4096, 512, false, true},
      {"square 1024", 1024, 1024, 1024, false, false},
  };
  std::printf("%-30s %6s %10s %10s\n", "GEMM (m n k)", "dtype", "ms", "GFLOP/s");
  Scenario sc;
  ModelShape ms;
  RankPlan plan;
  cpu::Scratch scratch;
  kernels::LossScaleState scaler;
  cpu::CpuContext ctx{plan, ms, sc, scratch, scaler};
  for (const Shape& s : shapes)
    for (DType t : {DType::f32, DType::bf16}) {
      std::vector<float> a(static_cast<size_t>(s.m * s.k), 0.5f), b(static_cast<size_t>(s.k * s.n), 0.25f), c(static_cast<size_t>(s.m * s.n));
      std::vector<uint8_t> A(a.size() * 4), B(b.size() * 4), C(c.size() * 4);
      cpu::store_f32(A.data(), t, static_cast<int64_t>(a.size()), a.data());
      cpu::store_f32(B.data(), t, static_cast<int64_t>(b.size()), b.data());
      Op op;
      op.kind = OpKind::gemm;
      GemmAttrs g;
      g.m = s.m, g.n = s.n, g.k = s.k, g.trans_a = s.ta, g.trans_b = s.tb, g.role = GemmRole::linear_fwd;
      op.attrs = g;
      OpPlan p;
      p.reads = {{0, 0, s.m * s.k, t}, {0, 0, s.k * s.n, t}};
      p.writes = {{0, 0, s.m * s.n, t}};
      std::vector<void*> r{A.data(), B.data()}, w{C.data()};
      NoWait nw;
      const OpCall call{op, p, r, w, nw, 1};
      const double sec = median_time([&] { cpu::run_gemm(call, ctx); }, 7);
      std::printf("%-30s %6s %10.3f %10.2f\n", s.name, t == DType::f32 ? "f32" : "bf16", sec * 1e3,
                  2.0 * double(s.m) * double(s.n) * double(s.k) / sec / 1e9);
    }
}

#if defined(PARALAB_EXEC_MPI)
void bench_comm(int* argc, char*** argv) {
  auto world = make_mpi_transport(argc, argv, CoreTurnsMode::from_environment(), DoorbellMode::from_environment());
  const int r = world->rank(), n = world->size();
  std::vector<int64_t> members;
  for (int i = 0; i < n; ++i) members.push_back(i);
  auto comm = world->split(0, r, members, "world/bench");
  NoWait w;
  if (r == 0) std::printf("%d ranks; %-16s %10s %10s %12s\n", n, "operation", "bytes", "us", "algbw GB/s");
  for (int64_t bytes = 4096; bytes <= (int64_t{16} << 20); bytes *= 4) {
    const int64_t count = bytes / 4;
    std::vector<float> a(static_cast<size_t>(count), 1.0f), b(static_cast<size_t>(count));
    struct Case {
      const char* name;
      std::function<void()> f;
    };
    const int64_t shard = count / n;
    const Case cases[] = {
        {"all_reduce", [&] { comm->all_reduce(a.data(), b.data(), count, DType::f32, ReduceOp::sum, w); }},
        {"all_gather", [&] { comm->all_gather(a.data(), b.data(), shard, DType::f32, w); }},
        {"reduce_scatter", [&] { comm->reduce_scatter(a.data(), b.data(), shard, DType::f32, ReduceOp::sum, w); }},
        {"ring sendrecv", [&] {
           comm->send_recv(a.data(), bytes, (r + 1) % n, b.data(), bytes, (r + n - 1) % n, 7, w);
         }},
    };
    for (const Case& c : cases) {
      world->barrier();
      const double sec = median_time(c.f, 9);
      int64_t us = static_cast<int64_t>(sec * 1e6);
      world->all_reduce(&us, 1, ReduceOp::max);
      if (r == 0)
        std::printf("%d ranks; %-16s %10lld %10lld %12.3f\n", n, c.name, (long long)bytes, (long long)us,
                    static_cast<double>(bytes) / (static_cast<double>(us) * 1e-6) / 1e9);
    }
  }
  comm.reset();
  world->finalize();
}
#endif

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "gemm";
  if (what == "gemm") {
    bench_gemm();
    return 0;
  }
#if defined(PARALAB_EXEC_MPI)
  if (what == "comm") {
    bench_comm(&argc, &argv);
    return 0;
  }
#endif
  std::fprintf(stderr, "usage: paralab_exec_bench gemm | comm (under mpirun)\n");
  return 2;
}
