// tests/exec/cuda — [gpu] tests of the CUDA backend (exit 77 without a device):
//  * the backend's device kernels against host formulas (strided copies with conversion and
//    accumulation, head packing, fills, cross-entropy stages, learned positions, the ring merge);
//  * whole training steps on one GPU against the CPU backend *op by op*: the CPU run records
//    every op's inputs and outputs; the GPU run is given the CPU's inputs before each op and its
//    outputs are compared (normalized max error: fp32 <= 1e-5, bf16 <= 1e-2, f16 <= 2e-3), over
//    scenarios covering GPT (LayerNorm, GELU, learned positions, dropout, flash and unfused
//    attention) and Llama (RMSNorm, SwiGLU, RoPE, GQA, micro-batch 2) in fp32, bf16 and fp16;
//  * two or more GPUs (skipped with one): the executor's own --verify checks on NCCL (every
//    collective kind on every communicator, sampled op references, replicas) over the in-process
//    world, for tensor, pipeline, data and context parallelism.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "../exec_test_util.hpp"
#include "exec/backends.hpp"
#include "exec/cuda/cuda_backend.hpp"
#include "exec/cuda/device_ops.hpp"
#include "exec/cuda/thread_world.hpp"
#include "exec/execute.hpp"
#include "exec/fill.hpp"
#include "exec/runtime.hpp"
#include "exec/verify.hpp"
#include "kernels/dtype.hpp"

using namespace paralab;
using namespace paralab::exec;
using namespace paralab::exec::test;
namespace dev = paralab::exec::cuda::dev;

namespace {

template <class T>
struct DevBuf {
  explicit DevBuf(size_t count) : n(count) { REQUIRE(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)) == cudaSuccess); }
  DevBuf(const DevBuf&) = delete;
  ~DevBuf() { cudaFree(p); }
  void up(const std::vector<T>& v) { REQUIRE(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess); }
  std::vector<T> down() const {
    std::vector<T> v(n);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    REQUIRE(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return v;
  }
  T* p = nullptr;
  size_t n;
};

// Normwise error of `got` against `want`. Equal values (the same infinity, or NaN in both) are no
// error: an output buffer's elements that the op does not write keep the CPU's bytes, which both
// sides start from, and uninitialized bf16 bytes can read as Inf or NaN.
double norm_err(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))) continue;
    const double e = std::abs(double(got[i]) - double(want[i]));
    err = std::isnan(e) ? INFINITY : std::max(err, e);
  }
  for (float w : want)
    if (std::isfinite(w)) scale = std::max(scale, std::abs(double(w)));
  return scale > 0 ? err / scale : err;
}

}  // namespace

TEST_CASE("device copies: strided rows, dtype conversion with one rounding, accumulation", "[gpu][exec][cuda]") {
  const int64_t rows = 37, cols = 19, sld = 23, dld = 29;
  const auto src = random_floats(static_cast<size_t>(rows * sld), 1);
  const auto dst0 = random_floats(static_cast<size_t>(rows * dld), 2);
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (bool acc : {false, true}) {
      CAPTURE(int(t), acc);
      const auto s = storage(src, DType::f32);
      const auto d = storage(dst0, t);
      DevBuf<uint8_t> S(s.size()), D(d.size());
      S.up(s);
      D.up(d);
      dev::copy2d(S.p, dev::T::f32, sld, D.p, static_cast<dev::T>(static_cast<int>(t)), dld, rows, cols, acc, nullptr);
      const auto got = values(D.down(), t);
      const auto before = values(d, t);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < dld; ++c) {
          const size_t o = static_cast<size_t>(r * dld + c);
          float want = before[o];
          if (c < cols) {
            const float v = src[static_cast<size_t>(r * sld + c)];
            std::vector<float> one{acc ? before[o] + v : v};
            want = values(storage(one, t), t)[0];
          }
          REQUIRE(got[o] == want);
        }
    }
}

TEST_CASE("device FP8 quantization: amax and the e4m3 copies, plain and transposed, equal the host's bit for bit",
          "[gpu][exec][cuda]") {
  // The host twin: amax over the stored values, scale = 448 / amax in float, each element
  // rounded by kernels/dtype.hpp's OFP8 encoder, [cols, rows] when transposed, and the
  // dequantization scale 1 / scale. Rows strided (ld > cols), so a view inside a wider tensor.
  const int64_t rows = 45, cols = 37, ld = 41;
  const auto src = random_floats(static_cast<size_t>(rows * ld), 7, 3.0f);
  for (DType t : {DType::f32, DType::bf16})
    for (bool transpose : {false, true}) {
      CAPTURE(int(t), transpose);
      const auto s = storage(src, t);
      const auto stored = values(s, t);
      float amax = 0;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::abs(stored[static_cast<size_t>(r * ld + c)]));
      const float scale = 448.0f / amax;
      DevBuf<uint8_t> X(s.size()), Q(static_cast<size_t>(rows * cols));
      DevBuf<float> sc(2);
      X.up(s);
      sc.up({0.f, 0.f});
      const auto dt = static_cast<dev::T>(static_cast<int>(t));
      dev::amax(X.p, dt, rows, cols, ld, sc.p, nullptr);
      dev::quantize_e4m3(X.p, dt, rows, cols, ld, transpose, sc.p, Q.p, sc.p + 1, nullptr);
      const auto scalars = sc.down();
      CHECK(scalars[0] == amax);
      CHECK(scalars[1] == 1.0f / scale);
      const auto q = Q.down();
      int64_t wrong = 0;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const uint8_t want = kernels::f32_to_e4m3_bits(stored[static_cast<size_t>(r * ld + c)] * scale);
          wrong += q[static_cast<size_t>(transpose ? c * rows + r : r * cols + c)] != want;
        }
      CHECK(wrong == 0);
    }
}

TEST_CASE("device head packing matches the qkv row layout, both ways", "[gpu][exec][cuda]") {
  const int64_t B = 2, H = 3, S = 5, D = 4, ld = 40, col0 = 7;
  const auto src = random_floats(static_cast<size_t>(S * B * ld), 3);
  DevBuf<float> in(src.size()), packed(static_cast<size_t>(B * H * S * D)), back(src.size());
  in.up(src);
  dev::pack_heads(in.p, dev::T::f32, ld, col0, D, packed.p, dev::T::f32, B, H, S, D, nullptr);
  const auto p = packed.down();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < S; ++i)
        for (int64_t c = 0; c < D; ++c)
          REQUIRE(p[static_cast<size_t>(((b * H + h) * S + i) * D + c)] ==
                  src[static_cast<size_t>((i * B + b) * ld + col0 + h * D + c)]);
  back.up(std::vector<float>(src.size(), 0.0f));
  dev::unpack_heads(packed.p, dev::T::f32, back.p, dev::T::f32, ld, col0, D, B, H, S, D, false, nullptr);
  const auto u = back.down();
  for (int64_t r = 0; r < S * B; ++r)
    for (int64_t c = col0; c < col0 + H * D; ++c) REQUIRE(u[static_cast<size_t>(r * ld + c)] == src[static_cast<size_t>(r * ld + c)]);
}

TEST_CASE("device fills equal the CPU backend's", "[gpu][exec][cuda]") {
  const int64_t n = 100003;
  DevBuf<float> w(static_cast<size_t>(n));
  dev::fill(w.p, dev::T::f32, n, 0, 77, 1000, 0, nullptr);
  const auto got = w.down();
  for (int64_t i = 0; i < n; ++i) REQUIRE(got[static_cast<size_t>(i)] == fill_value(Fill::weights, 77, 1000 + i));
  DevBuf<int32_t> ids(static_cast<size_t>(n));
  dev::fill(ids.p, dev::T::i32, n, 4, 5, 0, 50304, nullptr);
  const auto id = ids.down();
  for (int64_t i = 0; i < n; ++i) REQUIRE(id[static_cast<size_t>(i)] == token_id(5, i, 50304));
}

TEST_CASE("device cross-entropy stages and learned positions match host formulas", "[gpu][exec][cuda]") {
  const int64_t T = 7, V = 1000, vstart = 500, h = 6, b = 1;
  const auto logits = random_floats(static_cast<size_t>(T * V), 9, 3.0f);
  std::vector<float> mx(static_cast<size_t>(T), -INFINITY);
  for (int64_t r = 0; r < T; ++r)
    for (int64_t v = 0; v < V; ++v) mx[static_cast<size_t>(r)] = std::max(mx[static_cast<size_t>(r)], logits[static_cast<size_t>(r * V + v)]);
  std::vector<int32_t> labels{500, 999, 1200, 10, 700, 501, 1499};
  DevBuf<float> L(logits.size()), M(mx.size()), EX(logits.size()), SUMS(static_cast<size_t>(2 * T)), DL(logits.size());
  DevBuf<int32_t> LAB(labels.size());
  L.up(logits);
  M.up(mx);
  LAB.up(labels);
  dev::xent_sum(L.p, dev::T::f32, M.p, LAB.p, vstart, EX.p, SUMS.p, T, V, nullptr);
  const auto sums = SUMS.down();
  for (int64_t r = 0; r < T; ++r) {
    double s = 0;
    for (int64_t v = 0; v < V; ++v) s += std::exp(double(logits[static_cast<size_t>(r * V + v)]) - mx[static_cast<size_t>(r)]);
    CHECK(std::abs(sums[static_cast<size_t>(2 * r)] - s) / s < 1e-5);
    const int64_t local = labels[static_cast<size_t>(r)] - vstart;
    CHECK(sums[static_cast<size_t>(2 * r + 1)] == (local >= 0 && local < V ? logits[static_cast<size_t>(r * V + local)] : 0.0f));
  }
  dev::xent_bwd(EX.p, SUMS.p, LAB.p, vstart, 0.5f, nullptr, DL.p, dev::T::f32, T, V, nullptr);
  const auto d = DL.down();
  const auto ex = EX.down();
  for (int64_t r = 0; r < T; ++r)
    for (int64_t v = 0; v < V; v += 37) {
      double want = ex[static_cast<size_t>(r * V + v)] / sums[static_cast<size_t>(2 * r)];
      if (labels[static_cast<size_t>(r)] - vstart == v) want -= 1;
      CHECK(std::abs(d[static_cast<size_t>(r * V + v)] - 0.5 * want) < 1e-6);
    }
  // Positions: out[r] += pos[r / b + pos0]; gradient sums rows of a position.
  const int64_t pos0 = 2;
  const auto out0 = random_floats(static_cast<size_t>(T * h), 10), pos = random_floats(static_cast<size_t>((T + pos0) * h), 11);
  DevBuf<float> O(out0.size()), P(pos.size());
  O.up(out0);
  P.up(pos);
  dev::add_positions(O.p, dev::T::f32, P.p, dev::T::f32, T, h, b, pos0, nullptr);
  const auto o = O.down();
  for (int64_t r = 0; r < T; ++r)
    for (int64_t c = 0; c < h; ++c)
      REQUIRE(o[static_cast<size_t>(r * h + c)] == out0[static_cast<size_t>(r * h + c)] + pos[static_cast<size_t>((r + pos0) * h + c)]);
}

namespace {

// Every op's inputs (before) and outputs (after) of one rank's step, as raw bytes.
struct Snap {
  std::vector<std::vector<uint8_t>> reads, writes_before, writes_after;
};

class Recorder final : public OpObserver {
 public:
  explicit Recorder(Backend& be) : be_(be) {}
  bool wants(const Op& op) override { return !is_comm(op.kind); }
  void before(const OpCall& call) override {
    Snap s;
    for (size_t i = 0; i < call.reads.size(); ++i) s.reads.push_back(bytes(call.reads[i], call.plan.reads[i]));
    for (size_t i = 0; i < call.writes.size(); ++i) s.writes_before.push_back(bytes(call.writes[i], call.plan.writes[i]));
    std::lock_guard lk(mu_);
    snaps_[call.op.id] = std::move(s);
  }
  void after(const OpCall& call) override {
    std::vector<std::vector<uint8_t>> w;
    for (size_t i = 0; i < call.writes.size(); ++i) w.push_back(bytes(call.writes[i], call.plan.writes[i]));
    std::lock_guard lk(mu_);
    snaps_[call.op.id].writes_after = std::move(w);
  }
  std::map<OpId, Snap> snaps_;

 private:
  std::vector<uint8_t> bytes(const void* p, const ResolvedRef& r) {
    std::vector<uint8_t> v(static_cast<size_t>(r.numel * bytes_of(r.dtype)));
    be_.to_host(v.data(), p, static_cast<int64_t>(v.size()));
    return v;
  }
  Backend& be_;
  std::mutex mu_;
};

// Gives each GPU op the CPU's inputs, then compares its outputs with the CPU's.
class Replayer final : public OpObserver {
 public:
  Replayer(Backend& be, const std::map<OpId, Snap>& ref) : be_(be), ref_(ref) {}
  bool wants(const Op& op) override { return ref_.count(op.id) > 0; }
  void before(const OpCall& call) override {
    const Snap& s = ref_.at(call.op.id);
    for (size_t i = 0; i < call.reads.size(); ++i) be_.from_host(call.reads[i], s.reads[i].data(), static_cast<int64_t>(s.reads[i].size()));
    for (size_t i = 0; i < call.writes.size(); ++i)
      be_.from_host(call.writes[i], s.writes_before[i].data(), static_cast<int64_t>(s.writes_before[i].size()));
  }
  void after(const OpCall& call) override {
    const Snap& s = ref_.at(call.op.id);
    for (size_t i = 0; i < call.writes.size(); ++i) {
      const ResolvedRef& r = call.plan.writes[i];
      if (r.dtype == DType::i32) continue;
      std::vector<uint8_t> got(s.writes_after[i].size());
      be_.to_host(got.data(), call.writes[i], static_cast<int64_t>(got.size()));
      std::vector<float> g(static_cast<size_t>(r.numel)), w(static_cast<size_t>(r.numel));
      cpu::load_f32(got.data(), r.dtype, r.numel, g.data());
      cpu::load_f32(s.writes_after[i].data(), r.dtype, r.numel, w.data());
      const double e = norm_err(g, w);
      const double tol = r.dtype == DType::f32 ? 1e-5 : r.dtype == DType::f16 ? 2e-3 : 1e-2;
      std::lock_guard lk(mu_);
      ++compared;
      if (!(e <= tol) && failures.size() < 20)
        failures.push_back(op_label(call.op) + " output " + std::to_string(i) + ": normalized error " + std::to_string(e) +
                           " > " + std::to_string(tol));
      worst = std::max(worst, std::isnan(e) ? INFINITY : e);
    }
  }
  int64_t compared = 0;
  double worst = 0;
  std::vector<std::string> failures;

 private:
  Backend& be_;
  const std::map<OpId, Snap>& ref_;
  std::mutex mu_;
};

// dp_size > 1 stands the one rank in for a member of a data-parallel group of that size (only
// the cross-entropy gradient's scale reads it at run time, exec/plan.hpp xent_grad_scale).
void step_against_cpu(const std::string& name, const std::vector<std::string>& sets, int64_t dp_size = 1) {
  CAPTURE(name, sets, dp_size);
  const StepIR ir = build_step_ir(scenario(name, sets));
  REQUIRE(ir.layout.world() == 1);
  RankPlan plan = plan_rank(ir, 0, false);
  plan.dp_size = dp_size;
  auto world = make_self_transport();
  std::map<OpId, Snap> ref;
  double cpu_loss = 0;
  {
    auto cpu = make_backend("cpu", ir, 0);
    cpu->setup(plan, *world);
    Recorder rec(*cpu);
    RuntimeOptions ro;
    ro.observer = &rec;
    Runtime rt(plan, *cpu, *world, ro);
    rt.initialize();
    const StepRun run = rt.run_step(1);
    cpu_loss = run.loss_tokens ? run.loss_sum / run.loss_tokens : 0;
    ref = std::move(rec.snaps_);
  }
  auto gpu = make_backend("cuda", ir, 0);
  gpu->setup(plan, *world);
  Replayer rep(*gpu, ref);
  RuntimeOptions ro;
  ro.observer = &rep;
  Runtime rt(plan, *gpu, *world, ro);
  rt.initialize();
  const StepRun run = rt.run_step(1);
  for (const auto& f : rep.failures) UNSCOPED_INFO(f);
  CHECK(rep.failures.empty());
  CHECK(rep.compared > 0);
  INFO("worst normalized error " << rep.worst << " over " << rep.compared << " outputs");
  REQUIRE(run.loss_tokens > 0);
  const double gpu_loss = run.loss_sum / run.loss_tokens;
  CHECK(std::abs(gpu_loss - cpu_loss) / cpu_loss < 1e-3);
  CHECK(static_cast<int64_t>(run.ops.size()) == static_cast<int64_t>(plan.graph->ops.size()));
  for (const OpTiming& t : run.ops) CHECK(t.end_us >= t.start_us);
}

const std::vector<std::string> kOneGpuGpt = {"parallel.tensor=1", "cluster.devices_per_node=1", "model.num_layers=2",
                                            "training.global_batch_size=4", "model.seq_length=128"};

}  // namespace

TEST_CASE("one GPU, GPT fp32 (LayerNorm, GELU, learned positions, dropout, flash attention) == CPU op by op",
          "[gpu][exec][cuda][step]") {
  step_against_cpu("quickstart", kOneGpuGpt);
}

TEST_CASE("one GPU, GPT bf16 with unfused attention == CPU op by op", "[gpu][exec][cuda][step]") {
  auto sets = kOneGpuGpt;
  sets.push_back("training.precision=bf16");
  sets.push_back("training.attention=unfused");
  step_against_cpu("quickstart", sets);
}

TEST_CASE("one GPU, tiny Llama (RMSNorm, SwiGLU, RoPE, GQA, micro-batch 2) in fp32 and bf16 == CPU op by op",
          "[gpu][exec][cuda][step]") {
  for (const char* prec : {"fp32", "bf16"})
    step_against_cpu("cpu-dp2-zero2", {"parallel.data=1", "parallel.zero_stage=0", "cluster.devices_per_node=1",
                                       std::string("training.precision=") + prec});
}

TEST_CASE("one GPU, fp16 with loss scaling and SGD == CPU op by op", "[gpu][exec][cuda][step]") {
  step_against_cpu("cpu-1rank-fp16", {});
}

TEST_CASE("one GPU, no gradient-accumulation fusion over 2 micro-batches (grad_accumulate adds) == CPU op by op",
          "[gpu][exec][cuda][step]") {
  auto sets = kOneGpuGpt;
  sets.push_back("training.gradient_accumulation_fusion=false");
  step_against_cpu("quickstart", sets);
}

TEST_CASE("one GPU, fp16 from a loss scale of 2^32: the scale backs off on the device and the model trains",
          "[gpu][exec][cuda][step]") {
  // xent_bwd reads the dynamic scale on the device; with the initial scale baked in, every step
  // overflowed and was skipped (the CPU backend's twin: tests/exec/test_verify_refs.cpp).
  const StepIR ir = build_step_ir(scenario("cpu-1rank-fp16", {"training.initial_loss_scale=4294967296"}));
  const RankPlan plan = plan_rank(ir, 0, false);
  auto world = make_self_transport();
  auto gpu = make_backend("cuda", ir, 0);
  gpu->setup(plan, *world);
  RuntimeOptions ro;
  ro.watchdog_s = 60;
  Runtime rt(plan, *gpu, *world, ro);
  rt.initialize();
  double first = 0, last = 0;
  for (int64_t step = 1; step <= 40; ++step) {
    const StepRun run = rt.run_step(step);
    REQUIRE(run.loss_tokens > 0);
    last = run.loss_sum / static_cast<double>(run.loss_tokens);
    if (step == 1) first = last;
  }
  CAPTURE(first, last, gpu->loss_scale());
  CHECK(gpu->loss_scale() < 4294967296.0);
  CHECK(gpu->loss_scale() >= 1.0);
  CHECK(last < first);
}

TEST_CASE("one GPU, GPT in FP8: every linear GEMM in e4m3 on cuBLASLt, within --verify's FP8 bound, the loss near CPU's",
          "[gpu][exec][cuda][step]") {
  // The FP8 path (scaled e4m3 copies in the TN layout, A/B scale pointers, the BIAS epilogue or
  // our bias kernel) had never run on a GPU until gpu-1-fp8 failed in cublasLtMatmul
  // (2026-11-27, H200): this runs it at the quickstart's shapes, all multiples of 16.
  auto sets = kOneGpuGpt;
  sets.push_back("training.precision=fp8");
  sets.push_back("cluster.topology=dgx-h100");  // cpu-host has no FP8 peak to plan with
  const StepIR ir = build_step_ir(scenario("quickstart", sets));
  const RankPlan plan = plan_rank(ir, 0, false);
  int dev = 0, major = 0, minor = 0;
  REQUIRE(cudaGetDevice(&dev) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess);
  if (major * 10 + minor < 89) {
    WARN("no FP8 tensor cores on this GPU (compute capability " << major << "." << minor << "): not run");
    return;
  }
  auto world = make_self_transport();
  double cpu_loss = 0;
  {
    auto cpu = make_backend("cpu", ir, 0);  // runs the linear layers in bf16
    cpu->setup(plan, *world);
    Runtime rt(plan, *cpu, *world, RuntimeOptions{});
    rt.initialize();
    const StepRun run = rt.run_step(1);
    REQUIRE(run.loss_tokens > 0);
    cpu_loss = run.loss_sum / static_cast<double>(run.loss_tokens);
  }
  auto gpu = make_backend("cuda", ir, 0);
  gpu->setup(plan, *world);
  OpChecker checker(plan, *gpu, 1);
  RuntimeOptions ro;
  ro.observer = &checker;
  Runtime rt(plan, *gpu, *world, ro);
  rt.initialize();
  const StepRun run = rt.run_step(1);
  const VerifyReport rep = checker.report();
  for (const auto& f : rep.failures) UNSCOPED_INFO(f);
  CHECK(rep.failed() == 0);
  CHECK(rep.categories.count("ops.gemm") == 1);
  const auto stats = gpu->device_stats();
  CAPTURE(stats.at("fp8_bias_kernel_gemms"));
  CHECK(stats.at("fp8_fallback_gemms") == 0);
  REQUIRE(run.loss_tokens > 0);
  const double gpu_loss = run.loss_sum / static_cast<double>(run.loss_tokens);
  CAPTURE(cpu_loss, gpu_loss);
  CHECK(std::abs(gpu_loss - cpu_loss) / cpu_loss < 2e-2);
}

TEST_CASE("one GPU standing in for a data-parallel rank: the cross-entropy gradient's 1/dp scale == CPU",
          "[gpu][exec][cuda][step]") {
  step_against_cpu("quickstart", kOneGpuGpt, 2);
}

namespace {

// The executor on n GPUs of this process with --verify: every collective kind on every NCCL
// communicator, sampled op references, finite state and replicas.
void verify_on_gpus(const std::string& name, const std::vector<std::string>& sets) {
  CAPTURE(name, sets);
  const StepIR ir = build_step_ir(scenario(name, sets));
  const int n = static_cast<int>(ir.layout.world());
  int count = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  if (count < n) {
    WARN("skipped: " << name << " needs " << n << " GPUs, " << count << " visible");
    return;
  }
  std::mutex mu;
  std::vector<std::string> errors;
  bool failed = false;
  ExecuteOutcome root;
  const int rc = paralab::exec::cuda::run_rank_threads(n, [&](Transport& w) {
    ExecuteOptions o;
    o.backend = "cuda";
    o.verify = true;
    o.watchdog_s = 120;
    try {
      ExecuteOutcome out = execute(ir, w, o);
      std::lock_guard lk(mu);
      failed |= out.verify_failed;
      if (out.root) root = std::move(out);
      return 0;
    } catch (const std::exception& e) {
      std::lock_guard lk(mu);
      errors.push_back(e.what());
      return 1;
    }
  });
  for (const auto& e : errors) UNSCOPED_INFO(e);
  CHECK(rc == 0);
  CHECK_FALSE(failed);
  for (const auto& f : root.verify.failures) UNSCOPED_INFO(f);
  CHECK(root.verify.failed() == 0);
  CHECK(root.verify.total() > 0);
}

}  // namespace

TEST_CASE("several GPUs in one process: TP, PP (1F1B and interleaved), DP with ZeRO, CP pass --verify on NCCL",
          "[gpu][exec][cuda][multi]") {
  verify_on_gpus("cpu-tp2", {});
  verify_on_gpus("cpu-tp2-pp2-gpipe", {});
  verify_on_gpus("cpu-pp4", {});
  verify_on_gpus("cpu-pp4", {"parallel.schedule=1f1b", "parallel.virtual_pipeline_stages=1"});
  verify_on_gpus("cpu-dp2-zero2", {});
  verify_on_gpus("cpu-tp2-dp2-zero3", {});
  verify_on_gpus("cpu-cp2", {});
}

TEST_CASE("device parameter values equal exec/fill.hpp's for every split, in fp32 and bf16", "[gpu][exec][cuda]") {
  for (int split = 0; split <= 4; ++split) {
    ParamRegion r;
    r.rows = 300;
    r.split = static_cast<ParamSplit>(split);
    r.gain = split == 0;
    r.key = 4242 + static_cast<uint64_t>(split);
    r.tp = 1, r.tp_size = 2, r.heads = 4, r.groups = 2, r.head_dim = 8, r.ffn = 40;
    r.cols = split == 3 ? (4 + 2 * 2) * 8 : split == 4 ? 80 : 57;
    paralab::exec::fillmath::ParamGeo g;
    g.rows = r.rows, g.cols = r.cols, g.tp = r.tp, g.tp_size = r.tp_size, g.heads = r.heads, g.groups = r.groups;
    g.head_dim = r.head_dim, g.ffn = r.ffn, g.key = r.key, g.split = split, g.gain = r.gain ? 1 : 0;
    const int64_t local0 = 17, n = r.rows * r.cols - local0;
    DevBuf<float> w(static_cast<size_t>(n));
    dev::fill_params(w.p, dev::T::f32, n, g, local0, nullptr);
    DevBuf<uint16_t> h(static_cast<size_t>(n));
    dev::fill_params(h.p, dev::T::bf16, n, g, local0, nullptr);
    const auto got = w.down();
    const auto got16 = h.down();
    CAPTURE(split);
    for (int64_t i = 0; i < n; ++i) {
      const float want = param_value(r, (local0 + i) / r.cols, (local0 + i) % r.cols);
      REQUIRE(got[static_cast<size_t>(i)] == want);
      REQUIRE(got16[static_cast<size_t>(i)] == kernels::f32_to_bf16_bits(want));
    }
  }
}

TEST_CASE("a runtime's resident state made on the GPU equals the CPU backend's bit for bit", "[gpu][exec][cuda]") {
  for (const char* precision : {"fp32", "bf16"}) {
    auto sets = kOneGpuGpt;
    sets.push_back(std::string("training.precision=") + precision);
    CAPTURE(precision);
    const StepIR ir = build_step_ir(scenario("quickstart", sets));
    const RankPlan plan = plan_rank(ir, 0, false);
    auto world = make_self_transport();
    auto cpu = make_backend("cpu", ir, 0);
    cpu->setup(plan, *world);
    Runtime rc(plan, *cpu, *world, {});
    rc.initialize();
    auto gpu = make_backend("cuda", ir, 0);
    gpu->setup(plan, *world);
    Runtime rg(plan, *gpu, *world, {});
    rg.initialize();
    int64_t compared = 0;
    for (BufferId b = 0; b < plan.graph->buffers.size(); ++b) {
      if (!plan.graph->buffers[b].resident) continue;
      CAPTURE(plan.graph->buffers[b].name);
      REQUIRE(rg.read_buffer(b) == rc.read_buffer(b));
      ++compared;
    }
    CHECK(compared > 0);
  }
}
