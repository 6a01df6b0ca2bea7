// bench/kernels/bench_kernels.cpp — achieved bandwidth of paralab's memory-bound CUDA
// kernels, as a fraction of a device-to-device cudaMemcpy (the practical HBM ceiling).
//
// Method (see docs/kernels.md): bytes = the fewest bytes the kernel must move (each input
// read once, each output written once; small per-row/per-column vectors included), time =
// median of `repeats` CUDA-event-timed launches after `warmup` launches. Inputs hold random
// values (never zeros) and two independent sets of buffers alternate between launches so a
// launch never finds its inputs in L2 from the previous one. GB/s = 1e9 bytes per second.
// Output: one JSON document on stdout (and --out FILE). Project goal: >= 70% of copy.
//
// Usage: paralab_bench_kernels [--rows 8192] [--cols 4096,8192,12288] [--dtype bf16]
//                              [--warmup 3] [--repeats 20] [--out FILE]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/adamw.hpp"
#include "kernels/attention.hpp"
#include "kernels/cast.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/dropout.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gelu.hpp"
#include "kernels/l2norm.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/loss_scale.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/softmax.hpp"
#include "kernels/swiglu.hpp"

using namespace paralab::kernels;

namespace {

// Device allocation filled from a host pattern of random positive values in [0.5, 1.5),
// stored in the buffer's dtype (f32 words, or 16-bit words for bf16/f16).
class Dev {
 public:
  Dev(size_t bytes) : bytes_(bytes) { PARALAB_CUDA_CHECK(cudaMalloc(&p_, bytes)); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  ~Dev() { cudaFree(p_); }
  void* get() const { return p_; }
  float* f() const { return static_cast<float*>(p_); }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_;
};

struct Pattern {
  std::vector<uint8_t> host;  // random bytes for any dtype, reused for every buffer
  void fill(const Dev& d, Dtype t) const {
    const size_t chunk = host.size() / 4 * 4;
    // Re-encode the f32 pattern in the buffer's dtype once per call (cheap relative to runs).
    std::vector<uint8_t> enc(chunk / 4 * size_t(dtype_size(t)));
    const float* src = reinterpret_cast<const float*>(host.data());
    for (size_t i = 0; i < chunk / 4; ++i) {
      if (t == Dtype::f32) std::memcpy(&enc[i * 4], &src[i], 4);
      else {
        const uint16_t b = t == Dtype::bf16 ? f32_to_bf16_bits(src[i]) : f32_to_f16_bits(src[i]);
        std::memcpy(&enc[i * 2], &b, 2);
      }
    }
    for (size_t off = 0; off < d.bytes(); off += enc.size()) {
      const size_t n = std::min(enc.size(), d.bytes() - off);
      PARALAB_CUDA_CHECK(cudaMemcpy(static_cast<char*>(d.get()) + off, enc.data(), n, cudaMemcpyHostToDevice));
    }
  }
};

struct Result {
  std::string kernel, shape, dtype;
  double bytes, ms;
};

class Bench {
 public:
  Bench(int warmup, int repeats) : warmup_(warmup), repeats_(repeats) {
    PARALAB_CUDA_CHECK(cudaStreamCreate(&stream_));
    PARALAB_CUDA_CHECK(cudaEventCreate(&e0_));
    PARALAB_CUDA_CHECK(cudaEventCreate(&e1_));
  }
  ~Bench() {
    cudaEventDestroy(e0_);
    cudaEventDestroy(e1_);
    cudaStreamDestroy(stream_);
  }
  cudaStream_t stream() const { return stream_; }

  // Median milliseconds of launch(set) with set alternating 0, 1, 0, ...
  double median_ms(const std::function<void(int)>& launch) {
    for (int i = 0; i < warmup_; ++i) launch(i & 1);
    PARALAB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::vector<double> t;
    for (int i = 0; i < repeats_; ++i) {
      PARALAB_CUDA_CHECK(cudaEventRecord(e0_, stream_));
      launch(i & 1);
      PARALAB_CUDA_CHECK(cudaEventRecord(e1_, stream_));
      PARALAB_CUDA_CHECK(cudaEventSynchronize(e1_));
      float ms = 0;
      PARALAB_CUDA_CHECK(cudaEventElapsedTime(&ms, e0_, e1_));
      t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
  void add(const std::string& k, const std::string& shape, Dtype d, double bytes, double ms) {
    results.push_back({k, shape, dtype_name(d), bytes, ms});
    std::fprintf(stderr, "  %-26s %-22s %-5s %9.1f us %8.1f GB/s\n", k.c_str(), shape.c_str(),
                 dtype_name(d), ms * 1e3, bytes / (ms * 1e-3) / 1e9);
  }
  std::vector<Result> results;

 private:
  int warmup_, repeats_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t e0_ = nullptr, e1_ = nullptr;
};

std::string shape2(int64_t a, int64_t b) { return std::to_string(a) + "x" + std::to_string(b); }

std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::stoll(item));
  return v;
}

Dtype parse_dtype(const std::string& s) {
  if (s == "f32") return Dtype::f32;
  if (s == "f16") return Dtype::f16;
  if (s == "bf16") return Dtype::bf16;
  throw std::runtime_error("--dtype must be f32, bf16 or f16, got " + s);
}

// All memory-bound kernels at rows x cols (cols = hidden size; ffn width = cols too).
void bench_shape(Bench& B, const Pattern& pat, int64_t R, int64_t C, Dtype d) {
  const size_t es = size_t(dtype_size(d)), n = size_t(R * C);
  const std::string sh = shape2(R, C);
  cudaStream_t s = B.stream();
  // Two sets of every buffer, alternated by launch (set = 0/1).
  auto pair = [&](size_t bytes, Dtype t) {
    std::vector<std::unique_ptr<Dev>> v;
    for (int i = 0; i < 2; ++i) {
      v.push_back(std::make_unique<Dev>(bytes));
      pat.fill(*v.back(), t);
    }
    return v;
  };
  auto x = pair(n * es, d), y = pair(n * es, d), dy = pair(n * es, d), dx = pair(n * es, d);
  auto gamma = pair(static_cast<size_t>(C) * es, d), beta = pair(static_cast<size_t>(C) * es, d);
  auto stats = pair(static_cast<size_t>(R) * 8, Dtype::f32), pgrad = pair(static_cast<size_t>(C) * 8, Dtype::f32);
  float* mean[2] = {stats[0]->f(), stats[1]->f()};
  float* rstd[2] = {stats[0]->f() + R, stats[1]->f() + R};

  double ms = B.median_ms([&](int k) {
    layernorm_fwd_cuda({x[k]->get(), gamma[k]->get(), beta[k]->get(), y[k]->get(), mean[k], rstd[k], R, C, 1e-5f, d}, s);
  });
  B.add("layernorm_fwd", sh, d, 2.0 * n * es + 8.0 * R, ms);
  ms = B.median_ms([&](int k) {
    layernorm_bwd_cuda({dy[k]->get(), x[k]->get(), gamma[k]->get(), mean[k], rstd[k], dx[k]->get(),
                        pgrad[k]->f(), pgrad[k]->f() + C, true, R, C, d}, s);
  });
  B.add("layernorm_bwd", sh, d, 3.0 * n * es + 8.0 * R + 16.0 * C, ms);
  ms = B.median_ms([&](int k) {
    rmsnorm_fwd_cuda({x[k]->get(), gamma[k]->get(), y[k]->get(), rstd[k], R, C, 1e-5f, d}, s);
  });
  B.add("rmsnorm_fwd", sh, d, 2.0 * n * es + 4.0 * R, ms);
  ms = B.median_ms([&](int k) {
    rmsnorm_bwd_cuda({dy[k]->get(), x[k]->get(), gamma[k]->get(), rstd[k], dx[k]->get(), pgrad[k]->f(), true, R, C, d}, s);
  });
  B.add("rmsnorm_bwd", sh, d, 3.0 * n * es + 4.0 * R + 8.0 * C, ms);
  ms = B.median_ms([&](int k) { gelu_fwd_cuda({x[k]->get(), beta[k]->get(), y[k]->get(), R, C, d}, s); });
  B.add("bias_gelu_fwd", sh, d, 2.0 * n * es, ms);
  ms = B.median_ms([&](int k) {
    gelu_bwd_cuda({dy[k]->get(), x[k]->get(), beta[k]->get(), dx[k]->get(), pgrad[k]->f(), true, R, C, d}, s);
  });
  B.add("bias_gelu_bwd", sh, d, 3.0 * n * es + 8.0 * C, ms);
  ms = B.median_ms([&](int k) { gelu_bwd_cuda({dy[k]->get(), x[k]->get(), nullptr, dx[k]->get(), nullptr, false, R, C, d}, s); });
  B.add("gelu_bwd_nobias", sh, d, 3.0 * n * es, ms);
  {
    // swiglu: input [R, 2C] (x and dy buffers hold 2C-wide rows via y/dx pairs).
    auto x2 = pair(2 * n * es, d), dx2 = pair(2 * n * es, d);
    ms = B.median_ms([&](int k) { swiglu_fwd_cuda({x2[k]->get(), y[k]->get(), R, C, d}, s); });
    B.add("swiglu_fwd", sh, d, 3.0 * n * es, ms);
    ms = B.median_ms([&](int k) { swiglu_bwd_cuda({dy[k]->get(), x2[k]->get(), dx2[k]->get(), R, C, d}, s); });
    B.add("swiglu_bwd", sh, d, 5.0 * n * es, ms);
  }
  {
    auto mask = pair(n, Dtype::f32);
    ms = B.median_ms([&](int k) {
      dropout_add_fwd_cuda({x[k]->get(), beta[k]->get(), dy[k]->get(), y[k]->get(),
                            static_cast<uint8_t*>(mask[k]->get()), R, C, 0.1f, 1234, uint64_t(k) * n, d}, s);
    });
    B.add("bias_dropout_add_fwd", sh, d, 3.0 * n * es + n, ms);
    ms = B.median_ms([&](int k) {
      dropout_add_bwd_cuda({dy[k]->get(), static_cast<uint8_t*>(mask[k]->get()), dx[k]->get(), nullptr, false, R, C, 0.1f, d}, s);
    });
    B.add("dropout_bwd", sh, d, 2.0 * n * es + n, ms);
  }
  ms = B.median_ms([&](int k) {
    rope_fwd_cuda({x[k]->get(), y[k]->get(), R, C / 128, 128, 0, 1, 0, 10000.0, d}, s);
  });
  B.add("rope_fwd", sh + "(hd128)", d, 2.0 * n * es, ms);
  {
    std::vector<int32_t> ids(static_cast<size_t>(R));
    for (int64_t r = 0; r < R; ++r) ids[size_t(r)] = int32_t((r * 7919) % 50000);
    Dev dids(ids.size() * 4);
    PARALAB_CUDA_CHECK(cudaMemcpy(dids.get(), ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
    auto table = pair(static_cast<size_t>(50000) * C * es, d);
    ms = B.median_ms([&](int k) {
      embedding_fwd_cuda({static_cast<int32_t*>(dids.get()), table[k]->get(), y[k]->get(), R, C, 0, 50000, d}, s);
    });
    B.add("embedding_fwd", sh + "(V50000)", d, 2.0 * n * es + 4.0 * R, ms);
  }
  {
    auto f32 = pair(n * 4, Dtype::f32);
    ms = B.median_ms([&](int k) { cast_cuda({f32[k]->get(), Dtype::f32, y[k]->get(), d, int64_t(n)}, s); });
    B.add("cast_from_f32", sh, d, double(n) * (4 + es), ms);
    ms = B.median_ms([&](int k) { l2norm_sq_cuda({x[k]->get(), int64_t(n), d, pgrad[k]->f(), false}, s); });
    B.add("l2norm_sq", sh, d, double(n) * es, ms);
    auto flag = pair(4, Dtype::f32);
    PARALAB_CUDA_CHECK(cudaMemset(flag[0]->get(), 0, 4));
    PARALAB_CUDA_CHECK(cudaMemset(flag[1]->get(), 0, 4));
    ms = B.median_ms([&](int k) { check_overflow_cuda({x[k]->get(), int64_t(n), d, static_cast<int32_t*>(flag[k]->get())}, s); });
    B.add("check_overflow", sh, d, double(n) * es, ms);
    // AdamW over n parameters: master/m/v fp32 read+write, grad (dtype) read, param written.
    auto m1 = pair(n * 4, Dtype::f32), m2 = pair(n * 4, Dtype::f32);
    ms = B.median_ms([&](int k) {
      AdamWArgs a;
      a.master = f32[k]->f(); a.exp_avg = m1[k]->f(); a.exp_avg_sq = m2[k]->f();
      a.grad = x[k]->get(); a.grad_dtype = d; a.param = y[k]->get(); a.param_dtype = d;
      a.n = int64_t(n); a.lr = 1e-6f; a.weight_decay = 0.1f; a.step = 10;
      adamw_step_cuda(a, s);
    });
    B.add("adamw_step", std::to_string(n) + " params", d, double(n) * (24 + 2 * es), ms);
  }
}

void bench_softmax_ce(Bench& B, const Pattern& pat, Dtype d) {
  const size_t es = size_t(dtype_size(d));
  cudaStream_t s = B.stream();
  {  // attention scores [b*h = 16, 2048, 2048], causal
    const int64_t bh = 16, sq = 2048, n = bh * sq * sq;
    Dev xa(static_cast<size_t>(n) * es), xb(static_cast<size_t>(n) * es), ya(static_cast<size_t>(n) * es), yb(static_cast<size_t>(n) * es);
    for (Dev* p : {&xa, &xb, &ya, &yb}) pat.fill(*p, d);
    Dev* X[2] = {&xa, &xb};
    Dev* Y[2] = {&ya, &yb};
    const std::string sh = "16x2048x2048";
    double ms = B.median_ms([&](int k) {
      scaled_masked_softmax_fwd_cuda({X[k]->get(), Y[k]->get(), nullptr, bh, sq, sq, 1, 0.088f, true, d}, s);
    });
    B.add("scaled_masked_softmax_fwd", sh, d, 2.0 * n * es, ms);
    ms = B.median_ms([&](int k) {
      scaled_masked_softmax_bwd_cuda({X[k]->get(), Y[k]->get(), X[1 - k]->get(), bh, sq, sq, 0.088f, d}, s);
    });
    B.add("scaled_masked_softmax_bwd", sh, d, 3.0 * n * es, ms);
  }
  {  // logits [8192 tokens, 32000 local vocab]
    const int64_t R = 8192, V = 32000, n = R * V;
    Dev la(static_cast<size_t>(n) * es), lb(static_cast<size_t>(n) * es), g(static_cast<size_t>(n) * es), st(static_cast<size_t>(R) * 16);
    for (Dev* p : {&la, &lb}) pat.fill(*p, d);
    std::vector<int32_t> t(static_cast<size_t>(R));
    for (int64_t r = 0; r < R; ++r) t[size_t(r)] = int32_t((r * 31) % V);
    Dev dt(t.size() * 4);
    PARALAB_CUDA_CHECK(cudaMemcpy(dt.get(), t.data(), t.size() * 4, cudaMemcpyHostToDevice));
    Dev* L[2] = {&la, &lb};
    float* mx = st.f();
    float* se = st.f() + R;
    float* tl = st.f() + 2 * R;
    const std::string sh = shape2(R, V);
    double ms = B.median_ms([&](int k) { ce_local_max_cuda({L[k]->get(), mx, R, V, d}, s); });
    B.add("ce_local_max", sh, d, double(n) * es, ms);
    ms = B.median_ms([&](int k) {
      ce_local_sumexp_cuda({L[k]->get(), static_cast<int32_t*>(dt.get()), mx, se, tl, R, V, 0, d}, s);
    });
    B.add("ce_local_sumexp", sh, d, double(n) * es, ms);
    ms = B.median_ms([&](int k) {
      ce_bwd_cuda({L[k]->get(), static_cast<int32_t*>(dt.get()), mx, se, nullptr, 1.f / R, g.get(), R, V, 0, d}, s);
    });
    B.add("ce_bwd", sh, d, 2.0 * n * es, ms);
  }
}

// Flash attention is compute-bound: reported separately as TFLOP/s (causal: half the
// 4*b*h*s^2*d FLOPs of QK^T and PV).
struct AttnResult { std::string shape; double fwd_ms, bwd_ms, fwd_tflops, bwd_tflops; };
AttnResult bench_attention(Bench& B, const Pattern& pat, Dtype d) {
  const int64_t b = 1, h = 32, s_len = 2048, hd = 128, n = b * h * s_len * hd;
  const size_t es = size_t(dtype_size(d));
  std::vector<std::unique_ptr<Dev>> t;
  for (int i = 0; i < 8; ++i) {
    t.push_back(std::make_unique<Dev>(static_cast<size_t>(n) * es));
    pat.fill(*t.back(), d);
  }
  Dev lse(static_cast<size_t>(b * h * s_len) * 4);
  cudaStream_t s = B.stream();
  const double fl = 4.0 * b * h * double(s_len) * s_len * hd / 2;
  AttnResult r{std::to_string(b) + "x" + std::to_string(h) + "x" + std::to_string(s_len) + "x" + std::to_string(hd), 0, 0, 0, 0};
  r.fwd_ms = B.median_ms([&](int) {
    flash_attention_fwd_cuda({t[0]->get(), t[1]->get(), t[2]->get(), t[3]->get(), lse.f(), b, h, h, s_len, hd, 0.f, true, d}, s);
  });
  r.bwd_ms = B.median_ms([&](int) {
    flash_attention_bwd_cuda({t[0]->get(), t[1]->get(), t[2]->get(), t[3]->get(), t[4]->get(), lse.f(), t[5]->get(),
                              t[6]->get(), t[7]->get(), b, h, h, s_len, hd, 0.f, true, d}, s);
  });
  r.fwd_tflops = fl / (r.fwd_ms * 1e-3) / 1e12;
  r.bwd_tflops = 2.5 * fl / (r.bwd_ms * 1e-3) / 1e12;  // bwd: 5 GEMM-like products vs 2
  std::fprintf(stderr, "  flash_attention %s: fwd %.2f ms (%.1f TFLOP/s), bwd %.2f ms (%.1f TFLOP/s)\n",
               r.shape.c_str(), r.fwd_ms, r.fwd_tflops, r.bwd_ms, r.bwd_tflops);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 8192;
  std::vector<int64_t> cols = {4096, 8192, 12288};
  std::string dtype = "bf16", out_path;
  int warmup = 3, repeats = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) throw std::runtime_error("missing value after " + a);
      return argv[++i];
    };
    if (a == "--rows") rows = std::stoll(next());
    else if (a == "--cols") cols = parse_list(next());
    else if (a == "--dtype") dtype = next();
    else if (a == "--warmup") warmup = std::stoi(next());
    else if (a == "--repeats") repeats = std::stoi(next());
    else if (a == "--out") out_path = next();
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "paralab_bench_kernels: no CUDA device\n");
    return 1;
  }
  try {
    const Dtype d = parse_dtype(dtype);
    cudaDeviceProp prop{};
    PARALAB_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    Bench B(warmup, repeats);
    Pattern pat;
    {
      pat.host.resize(size_t(64) << 20);  // 64 MiB of random f32 in [0.5, 1.5)
      uint64_t st = 0x9E3779B97F4A7C15ull;
      float* f = reinterpret_cast<float*>(pat.host.data());
      for (size_t i = 0; i < pat.host.size() / 4; ++i) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;  // Knuth's MMIX LCG
        f[i] = 0.5f + float(st >> 40) / float(1 << 24);
      }
    }
    // Copy ceiling: D2D cudaMemcpy of 1 GiB, bytes = read + write.
    const size_t copy_bytes = size_t(1) << 30;
    Dev ca(copy_bytes), cb(copy_bytes);
    PARALAB_CUDA_CHECK(cudaMemset(ca.get(), 1, copy_bytes));
    const double copy_ms = B.median_ms([&](int k) {
      PARALAB_CUDA_CHECK(cudaMemcpyAsync(k ? ca.get() : cb.get(), k ? cb.get() : ca.get(), copy_bytes,
                                         cudaMemcpyDeviceToDevice, B.stream()));
    });
    const double copy_gbps = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;
    std::fprintf(stderr, "device %s: D2D copy %.1f GB/s\n", prop.name, copy_gbps);
    for (int64_t c : cols) bench_shape(B, pat, rows, c, d);
    bench_softmax_ce(B, pat, d);
    const AttnResult att = bench_attention(B, pat, d);

    std::ostringstream js;
    js << "{\n  \"device\": \"" << prop.name << "\",\n  \"sm_count\": " << prop.multiProcessorCount
       << ",\n  \"l2_bytes\": " << prop.l2CacheSize << ",\n  \"warmup\": " << warmup
       << ",\n  \"repeats\": " << repeats << ",\n  \"d2d_copy_gbps\": " << copy_gbps
       << ",\n  \"goal_fraction_of_copy\": 0.7,\n  \"kernels\": [\n";
    for (size_t i = 0; i < B.results.size(); ++i) {
      const Result& r = B.results[i];
      const double gbps = r.bytes / (r.ms * 1e-3) / 1e9;
      js << "    {\"kernel\": \"" << r.kernel << "\", \"shape\": \"" << r.shape << "\", \"dtype\": \""
         << r.dtype << "\", \"bytes\": " << std::llround(r.bytes) << ", \"time_us\": " << r.ms * 1e3
         << ", \"gbps\": " << gbps << ", \"fraction_of_copy\": " << gbps / copy_gbps << "}"
         << (i + 1 < B.results.size() ? ",\n" : "\n");
    }
    js << "  ],\n  \"flash_attention\": {\"shape\": \"" << att.shape << "\", \"dtype\": \"" << dtype
       << "\", \"causal\": true, \"fwd_ms\": " << att.fwd_ms << ", \"fwd_tflops\": " << att.fwd_tflops
       << ", \"bwd_ms\": " << att.bwd_ms << ", \"bwd_tflops\": " << att.bwd_tflops << "}\n}\n";
    std::fputs(js.str().c_str(), stdout);
    if (!out_path.empty()) {
      FILE* f = std::fopen(out_path.c_str(), "w");
      if (!f) throw std::runtime_error("cannot write " + out_path);
      std::fputs(js.str().c_str(), f);
      std::fclose(f);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paralab_bench_kernels: %s\n", e.what());
    return 1;
  }
  return 0;
}
