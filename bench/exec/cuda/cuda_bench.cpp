// bench/exec/cuda/cuda_bench.cpp — the CUDA backend's throughput on a scenario's shapes
// (results in bench/results/, written by scripts/gpu_checks.sh):
//  * GEMMs: every distinct GEMM of rank 0's graph (role, shape, dtypes) run exactly as the
//    backend runs it (gemm_plan.hpp's calls on cuBLASLt, GQA scratch, bias epilogue, bias
//    gradient, fp8 quantization) against "cuBLAS alone": one cublasGemmStridedBatchedEx of the
//    same m, n, k, batch and types on contiguous operands. Reported: TFLOP/s of both and their
//    ratio (project goal: backend >= 95% of cuBLAS alone), and a FLOP-weighted total.
//  * the backend's own memory-bound kernels (strided copy, head packing, cross-entropy stages,
//    FP8 amax and e4m3 quantization on both of its paths) as a fraction of a device-to-device cudaMemcpy (project goal >= 70%); the kernels/ ones are
//    benchmarked by bench/kernels.
// Method: CUDA-event time of each launch, median of --repeats after --warmup; operands hold
// seeded random values. Output: one JSON document on stdout (and --out FILE).
//
// Usage: paralab_bench_exec_cuda [--scenario scenarios/gpu-1.toml] [--set k=v]...
//                                [--warmup 3] [--repeats 20] [--out FILE]
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "exec/cuda/cuda_ops.hpp"
#include "exec/plan.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/step_ir.hpp"

using namespace paralab;
using namespace paralab::exec;
using namespace paralab::exec::cuda;

namespace {

#define BENCH_CUBLAS(expr)                                                                    \
  do {                                                                                        \
    const cublasStatus_t s_ = (expr);                                                         \
    if (s_ != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(#expr) + " failed: " + std::to_string(int(s_))); \
  } while (0)

struct Opts {
  std::string scenario = "scenarios/gpu-1.toml";
  std::vector<std::string> sets;
  int warmup = 3, repeats = 20;
  std::string out;
};

class Timer {
 public:
  explicit Timer(cudaStream_t s) : s_(s) {
    PARALAB_CU(cudaEventCreate(&a_));
    PARALAB_CU(cudaEventCreate(&b_));
  }
  ~Timer() {
    cudaEventDestroy(a_);
    cudaEventDestroy(b_);
  }
  // Median microseconds of f() over `repeats` after `warmup`.
  template <class F>
  double median_us(F&& f, int warmup, int repeats) {
    for (int i = 0; i < warmup; ++i) f();
    std::vector<double> t;
    for (int i = 0; i < repeats; ++i) {
      PARALAB_CU(cudaEventRecord(a_, s_));
      f();
      PARALAB_CU(cudaEventRecord(b_, s_));
      PARALAB_CU(cudaEventSynchronize(b_));
      float ms = 0;
      PARALAB_CU(cudaEventElapsedTime(&ms, a_, b_));
      t.push_back(1e3 * ms);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }

 private:
  cudaStream_t s_;
  cudaEvent_t a_ = nullptr, b_ = nullptr;
};

struct DevMem {
  explicit DevMem(int64_t bytes) { PARALAB_CU(cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 256)))); }
  ~DevMem() { cudaFree(p); }
  DevMem(const DevMem&) = delete;
  void* p = nullptr;
};

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    default: return CUDA_R_8U;
  }
}

double copy_bandwidth(cudaStream_t s, Timer& tm, const Opts& o) {
  const int64_t bytes = int64_t(1) << 30;
  DevMem a(bytes), b(bytes);
  PARALAB_CU(cudaMemsetAsync(a.p, 1, static_cast<size_t>(bytes), s));
  const double us = tm.median_us([&] { PARALAB_CU(cudaMemcpyAsync(b.p, a.p, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, s)); },
                                 o.warmup, o.repeats);
  return 2.0 * static_cast<double>(bytes) / (us * 1e-6) / 1e9;  // read + write
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--scenario") o.scenario = next();
    else if (a == "--set") o.sets.push_back(next());
    else if (a == "--warmup") o.warmup = std::stoi(next());
    else if (a == "--repeats") o.repeats = std::stoi(next());
    else if (a == "--out") o.out = next();
    else {
      std::fprintf(stderr, "usage: paralab_bench_exec_cuda [--scenario FILE] [--set k=v]... [--warmup N] [--repeats N] [--out FILE]\n");
      return 2;
    }
  }
  try {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      std::fprintf(stderr, "paralab_bench_exec_cuda: no CUDA device\n");
      return 1;
    }
    cudaDeviceProp prop{};
    PARALAB_CU(cudaGetDeviceProperties(&prop, 0));
    cudaStream_t s = nullptr;
    PARALAB_CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    Timer tm(s);
    nlohmann::json out;
    out["device"] = prop.name;
    out["compute_capability"] = prop.major * 10 + prop.minor;
    out["scenario"] = o.scenario;
    out["sets"] = o.sets;
    const double copy_gbps = copy_bandwidth(s, tm, o);
    out["copy_gbps"] = copy_gbps;

    const Scenario sc = load_scenario(o.scenario, o.sets);
    const StepIR ir = build_step_ir(sc);
    const RankPlan plan = plan_rank(ir, 0, false);
    const StepGraph& g = *plan.graph;
    const ModelShape& m = ir.shape;

    // ---- GEMMs: the backend's path vs cuBLAS alone ------------------------------------------
    StreamRes res;
    res.stream = s;
    res.lt = std::make_unique<LtGemm>(s, size_t(32) << 20);
    PARALAB_CU(cudaMalloc(&res.scalars, ScalarSlots::kBytes));
    std::vector<GemmPlan> plans(g.ops.size());
    std::atomic<int64_t> fallbacks{0};
    cublasHandle_t blas = nullptr;
    BENCH_CUBLAS(cublasCreate(&blas));
    BENCH_CUBLAS(cublasSetStream(blas, s));
    DevMem ws(size_t(32) << 20);
    BENCH_CUBLAS(cublasSetWorkspace(blas, ws.p, size_t(32) << 20));
    int fp8_ok = prop.major * 10 + prop.minor >= 89;

    using Key = std::tuple<int, int64_t, int64_t, int64_t, int64_t, bool, bool, bool, bool, int, int, int>;
    std::map<Key, std::pair<OpId, int64_t>> distinct;  // -> (first op, count)
    for (const Op& op : g.ops) {
      const GemmAttrs* ga = op.gemm();
      if (!ga) continue;
      const Key k{int(ga->role), ga->m, ga->n, ga->k, ga->batch, ga->trans_a, ga->trans_b, ga->accumulate, ga->bias,
                  int(ga->math), int(plan.ops[op.id].reads[0].dtype), int(plan.ops[op.id].writes[0].dtype)};
      auto [it, fresh] = distinct.emplace(k, std::make_pair(op.id, 0));
      ++it->second.second;
      (void)fresh;
    }
    nlohmann::json gemms = nlohmann::json::array();
    double flops_total = 0, t_ours = 0, t_ref = 0;
    for (const auto& [k, v] : distinct) {
      const Op& op = g.op(v.first);
      const GemmAttrs& ga = *op.gemm();
      const OpPlan& op_plan = plan.ops[op.id];
      plans[op.id] = plan_gemm(op, m);
      std::vector<std::unique_ptr<DevMem>> bufs;
      std::vector<void*> rp, wp;
      for (const ResolvedRef& r : op_plan.reads) {
        bufs.push_back(std::make_unique<DevMem>(r.numel * bytes_of(r.dtype)));
        if (r.dtype == DType::f32 || r.dtype == DType::bf16 || r.dtype == DType::f16)
          dev::fill(bufs.back()->p, dt(r.dtype), r.numel, 0, 1234 + bufs.size(), 0, 0, s);
        rp.push_back(bufs.back()->p);
      }
      for (const ResolvedRef& r : op_plan.writes) {
        bufs.push_back(std::make_unique<DevMem>(r.numel * bytes_of(r.dtype)));
        PARALAB_CU(cudaMemsetAsync(bufs.back()->p, 0, static_cast<size_t>(r.numel * bytes_of(r.dtype)), s));
        wp.push_back(bufs.back()->p);
      }
      // A write that is also read (accumulation, d_qkv) is the same buffer.
      for (size_t i = 0; i < op.reads.size(); ++i)
        for (size_t w = 0; w < op.writes.size(); ++w)
          if (op.reads[i].buffer == op.writes[w].buffer) rp[i] = wp[w];
      struct NoWait final : WaitPolicy {
        void check(double) const override {}
      } nowait;
      const OpCall call{op, op_plan, rp, wp, nowait, 1};
      CudaOpContext ctx{plan, m, sc, res};
      ctx.gemm_plans = &plans;
      ctx.fp8 = fp8_ok;
      ctx.fp8_fallbacks = &fallbacks;
      const double ours = tm.median_us([&] { run_gemm(call, ctx); }, o.warmup, o.repeats);

      // cuBLAS alone: the same problem as one strided-batched GEMM on contiguous operands.
      const DType at = op_plan.reads[0].dtype, ct = op_plan.writes[0].dtype;
      const int64_t M = ga.m, N = ga.n, K = ga.k, B = ga.batch;
      DevMem A(M * K * B * bytes_of(at)), Bm(K * N * B * bytes_of(at)), C(M * N * B * bytes_of(ct));
      dev::fill(A.p, dt(at), M * K * B, 0, 7, 0, 0, s);
      dev::fill(Bm.p, dt(at), K * N * B, 0, 8, 0, 0, s);
      PARALAB_CU(cudaMemsetAsync(C.p, 0, static_cast<size_t>(M * N * B * bytes_of(ct)), s));
      const float alpha = 1.0f, beta = ga.accumulate ? 1.0f : 0.0f;
      const cublasComputeType_t compute =
          ga.math == MathMode::tf32 && at == DType::f32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      const int64_t lda = ga.trans_a ? M : K, ldb = ga.trans_b ? K : N;
      const double ref = tm.median_us(
          [&] {
            BENCH_CUBLAS(cublasGemmStridedBatchedEx(
                blas, ga.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, ga.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, int(N), int(M), int(K),
                &alpha, Bm.p, cuda_type(at), int(ldb), K * N, A.p, cuda_type(at), int(lda), M * K, &beta, C.p,
                cuda_type(ct), int(N), M * N, int(B), compute, CUBLAS_GEMM_DEFAULT));
          },
          o.warmup, o.repeats);
      const double flops = 2.0 * double(M) * double(N) * double(K) * double(B);
      flops_total += flops * double(v.second);
      t_ours += ours * double(v.second);
      t_ref += ref * double(v.second);
      gemms.push_back({{"role", std::string(to_string(ga.role))},
                       {"name", op.name},
                       {"m", M}, {"n", N}, {"k", K}, {"batch", B},
                       {"trans_a", ga.trans_a}, {"trans_b", ga.trans_b}, {"bias", ga.bias}, {"accumulate", ga.accumulate},
                       {"math", std::string(to_string(ga.math))},
                       {"in", std::string(to_string(at))}, {"out", std::string(to_string(ct))},
                       {"count_per_step", v.second},
                       {"cublas_calls", plans[op.id].calls.size()},
                       {"time_us", ours}, {"cublas_alone_us", ref},
                       {"tflops", flops / (ours * 1e-6) / 1e12}, {"cublas_alone_tflops", flops / (ref * 1e-6) / 1e12},
                       {"fraction_of_cublas", ref / ours}});
    }
    out["gemms"] = gemms;
    out["gemm_total"] = {{"flops_per_step", flops_total},
                         {"time_us", t_ours},
                         {"cublas_alone_time_us", t_ref},
                         {"tflops", flops_total / (t_ours * 1e-6) / 1e12},
                         {"cublas_alone_tflops", flops_total / (t_ref * 1e-6) / 1e12},
                         {"fraction_of_cublas", t_ref / t_ours},
                         {"goal", 0.95},
                         {"fp8_fallbacks", fallbacks.load()}};

    // ---- the backend's memory-bound kernels vs copy -----------------------------------------
    nlohmann::json mem = nlohmann::json::array();
    auto record = [&](const std::string& name, const std::string& shape, double bytes, double us) {
      const double gbps = bytes / (us * 1e-6) / 1e9;
      mem.push_back({{"kernel", name}, {"shape", shape}, {"bytes", bytes}, {"time_us", us}, {"gbps", gbps},
                     {"fraction_of_copy", gbps / copy_gbps}});
    };
    {
      const DType t = m.act;
      const int64_t T = m.tokens(), qc = m.qkv_cols(), V = m.vocab_local(), es = bytes_of(t);
      DevMem qkv(T * qc * es), packed(T * qc * es), ex(T * V * 4), logits(T * V * es), sums(T * 8), mx(T * 4), lab(T * 4),
          dl(T * V * es);
      dev::fill(qkv.p, dt(t), T * qc, 0, 1, 0, 0, s);
      dev::fill(logits.p, dt(t), T * V, 0, 2, 0, 0, s);
      PARALAB_CU(cudaMemsetAsync(mx.p, 0, static_cast<size_t>(T * 4), s));
      dev::fill(lab.p, dev::T::i32, T, 4, 3, 0, V, s);
      const std::string tv = std::to_string(T) + "x" + std::to_string(V);
      record("copy2d (q columns of qkv)", std::to_string(T) + "x" + std::to_string(m.attn_cols()),
             2.0 * double(T * m.attn_cols() * es),
             tm.median_us([&] { dev::copy2d(qkv.p, dt(t), qc, packed.p, dt(t), m.attn_cols(), T, m.attn_cols(), false, s); },
                          o.warmup, o.repeats));
      record("pack_heads (q to [b,h,s,d])", std::to_string(T) + "x" + std::to_string(m.attn_cols()),
             2.0 * double(T * m.attn_cols() * es), tm.median_us([&] {
               dev::pack_heads(qkv.p, dt(t), qc, 0, m.head_dim, packed.p, dt(t), m.micro_batch, m.heads_local(), m.seq_local(),
                               m.head_dim, s);
             }, o.warmup, o.repeats));
      record("xent_sum", tv, double(T * V * (es + 4)), tm.median_us([&] {
               dev::xent_sum(logits.p, dt(t), static_cast<float*>(mx.p), static_cast<int32_t*>(lab.p), 0,
                             static_cast<float*>(ex.p), static_cast<float*>(sums.p), T, V, s);
             }, o.warmup, o.repeats));
      record("xent_bwd", tv, double(T * V * (4 + es)), tm.median_us([&] {
               dev::xent_bwd(static_cast<float*>(ex.p), static_cast<float*>(sums.p), static_cast<int32_t*>(lab.p), 0, 1.0f,
                             nullptr, dl.p, dt(t), T, V, s);
             }, o.warmup, o.repeats));
    }
    {
      // FP8 quantization of the largest linear operand (the fc1 weight, [fc1_cols, hidden], as
      // the backend quantizes it at every call): amax reads it, the e4m3 copy reads it and writes
      // a byte per element. "scalar path": the same matrix as a view with an odd row stride,
      // which exec/cuda/fp8_quantize.cu cannot vectorize.
      const DType t = m.act;
      const int64_t R = m.fc1_cols(), C = m.hidden, es = bytes_of(t), n = R * C;
      DevMem x(R * (C + 1) * es), q(n), slots(ScalarSlots::kBytes);
      dev::fill(x.p, dt(t), R * (C + 1), 0, 5, 0, 0, s);
      auto* amax = static_cast<float*>(slots.p);
      auto* inv = amax + 64;
      auto* u8 = static_cast<uint8_t*>(q.p);
      const std::string shape = std::to_string(R) + "x" + std::to_string(C);
      const double rd = double(n * es), rw = double(n * (es + 1));
      auto zero = [&] { PARALAB_CU(cudaMemsetAsync(amax, 0, 4, s)); };
      record("fp8 amax", shape, rd, tm.median_us([&] { zero(); dev::amax(x.p, dt(t), R, C, C, amax, s); }, o.warmup, o.repeats));
      record("fp8 quantize e4m3", shape, rw,
             tm.median_us([&] { dev::quantize_e4m3(x.p, dt(t), R, C, C, false, amax, u8, inv, s); }, o.warmup, o.repeats));
      record("fp8 quantize e4m3, transposed", shape, rw,
             tm.median_us([&] { dev::quantize_e4m3(x.p, dt(t), R, C, C, true, amax, u8, inv, s); }, o.warmup, o.repeats));
      record("fp8 amax (scalar path)", shape, rd,
             tm.median_us([&] { zero(); dev::amax(x.p, dt(t), R, C, C + 1, amax, s); }, o.warmup, o.repeats));
      record("fp8 quantize e4m3 (scalar path)", shape, rw,
             tm.median_us([&] { dev::quantize_e4m3(x.p, dt(t), R, C, C + 1, false, amax, u8, inv, s); }, o.warmup, o.repeats));
      record("fp8 quantize e4m3, transposed (scalar path)", shape, rw,
             tm.median_us([&] { dev::quantize_e4m3(x.p, dt(t), R, C, C + 1, true, amax, u8, inv, s); }, o.warmup, o.repeats));
    }
    out["memory_bound"] = mem;
    out["memory_bound_goal"] = 0.70;
    cublasDestroy(blas);
    cudaFree(res.scalars);
    res.lt.reset();
    cudaStreamDestroy(s);

    const std::string text = out.dump(2);
    std::printf("%s\n", text.c_str());
    if (!o.out.empty()) std::ofstream(o.out) << text << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paralab_bench_exec_cuda: error: %s\n", e.what());
    return 1;
  }
}
