// bench/exec/cuda/fp8_probe.cpp — which cuBLASLt FP8 (e4m3) matmul configurations this GPU and
// library run, beside a bf16 control. cuBLASLt can refuse an FP8 call ("TN", bf16 C == D in
// place, A/B scale pointers, BIAS epilogue or none) with CUBLAS_STATUS_NOT_SUPPORTED for every
// algorithm its heuristic offered, without logging a reason. This probe varies one thing at a
// time from the call that was refused and reports,
// per variant, how many algorithms the heuristic offers and how many of them the call then
// runs, so one short GPU run says which difference matters. Shapes: gpt-1.7b's QKV GEMM
// (m 6912, n 1024, k 2304) and a small 64^3 one. Last, per shape, the backend's own LtGemm::run
// (exec/cuda) with the FP8 call ops_gemm.cpp makes, and a bf16 control through it. The backend
// passes C as nullptr (beta 0) and keeps its scales 256 B apart ("backend now"); "refused call"
// is the call that was refused (in place, scales at +8/+12 bytes).
//
// Usage: paralab_fp8_probe [--out FILE]   (one JSON document on stdout, and FILE)
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "exec/cuda/cuda_ops.hpp"

namespace {

// Probe failures are results, not errors; only a failed allocation or descriptor ends the run.
#define PROBE_CHECK(expr)                                                                          \
  do {                                                                                             \
    const auto probe_s_ = (expr);                                                                  \
    if (static_cast<int>(probe_s_) != 0) {                                                         \
      std::fprintf(stderr, "paralab_fp8_probe: %s failed (%d) at %s:%d\n", #expr,                  \
                   static_cast<int>(probe_s_), __FILE__, __LINE__);                                \
      throw std::runtime_error(#expr);                                                             \
    }                                                                                              \
  } while (0)

// One variant of the backend's FP8 call: what differs from it.
struct Variant {
  std::string name;
  bool out_of_place = false;   // D a separate buffer (C still read, beta = 0)
  bool c_null = false;         // C pointer nullptr (beta = 0); D in place unless out_of_place
  bool bias = false;           // BIAS epilogue (bf16 bias of length m)
  bool scales = true;          // A/B scale pointers set
  bool scales_16b = false;     // each scale in its own 256-byte aligned allocation
  bool d_fp32 = false;         // C and D in fp32 instead of bf16
  bool fast_accum = false;     // CUBLASLT_MATMUL_DESC_FAST_ACCUM = 1
  bool workspace = true;       // the backend's 32 MiB workspace (false: none)
  bool beta_one = false;       // accumulate into C (beta = 1), in place
  bool bf16_inputs = false;    // control: A and B in bf16, no scales (what the backend runs)
  bool align_prefs = false;    // the backend's MIN_ALIGNMENT_{A,B,C,D}_BYTES preferences
};

struct Buffers {
  void* a = nullptr;     // e4m3 (or bf16: room for 2 bytes), k x m column-major (A^T stored)
  void* b = nullptr;     // e4m3 (or bf16), k x n column-major
  void* c = nullptr;     // m x n, 4 bytes per element (room for fp32)
  void* d = nullptr;     // m x n, out of place
  void* bias = nullptr;  // m bf16
  float* scales = nullptr;  // [0..3]: the backend's layout (scale_inv a/b at +2, +3)
  float* scale_a = nullptr;
  float* scale_b = nullptr;
  void* slots = nullptr;  // the backend's per-stream scalars (exec/cuda ScalarSlots)
  void* ws = nullptr;
};

nlohmann::json probe(cublasLtHandle_t lt, const Variant& v, int64_t m, int64_t n, int64_t k, const Buffers& buf,
                     size_t ws_bytes, cudaStream_t stream) {
  nlohmann::json out;
  out["variant"] = v.name;
  out["m"] = m, out["n"] = n, out["k"] = k;
  const cudaDataType_t ct = v.d_fp32 ? CUDA_R_32F : CUDA_R_16BF;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  PROBE_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  PROBE_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  PROBE_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  const cudaDataType_t in_t = v.bf16_inputs ? CUDA_R_16BF : CUDA_R_8F_E4M3;
  if (v.scales && !v.bf16_inputs) {
    const float* sa = v.scales_16b ? buf.scale_a : buf.scales + 2;
    const float* sb = v.scales_16b ? buf.scale_b : buf.scales + 3;
    PROBE_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa));
    PROBE_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb));
  }
  if (v.bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    const int32_t bt = CUDA_R_16BF;
    PROBE_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    PROBE_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    PROBE_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &buf.bias, sizeof buf.bias));
  }
  if (v.fast_accum) {
    const int8_t on = 1;
    PROBE_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &on, sizeof on));
  }
  PROBE_CHECK(cublasLtMatrixLayoutCreate(&la, in_t, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k));
  PROBE_CHECK(cublasLtMatrixLayoutCreate(&lb, in_t, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k));
  PROBE_CHECK(cublasLtMatrixLayoutCreate(&lc, ct, static_cast<uint64_t>(m), static_cast<uint64_t>(n), m));
  PROBE_CHECK(cublasLtMatrixLayoutCreate(&ld, ct, static_cast<uint64_t>(m), static_cast<uint64_t>(n), m));
  PROBE_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = v.workspace ? ws_bytes : 0;
  PROBE_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  if (v.align_prefs) {
    const void* d_ptr = v.out_of_place ? buf.d : buf.c;
    const uint32_t al_a = paralab::exec::cuda::alignment(buf.a), al_b = paralab::exec::cuda::alignment(buf.b),
                   al_c = paralab::exec::cuda::alignment(d_ptr);
    PROBE_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a));
    PROBE_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b));
    PROBE_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c));
    PROBE_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c));
  }
  std::array<cublasLtMatmulHeuristicResult_t, 8> res{};
  int found = 0;
  const cublasStatus_t hs =
      cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, ld, pref, static_cast<int>(res.size()), res.data(), &found);
  out["heuristic_status"] = static_cast<int>(hs);
  out["offered"] = hs == CUBLAS_STATUS_SUCCESS ? found : 0;
  const float alpha = 1.0f, beta = v.beta_one ? 1.0f : 0.0f;
  const void* c = v.c_null ? nullptr : buf.c;
  void* d = v.out_of_place ? buf.d : buf.c;
  int ran = 0;
  std::vector<int> statuses;
  for (int i = 0; hs == CUBLAS_STATUS_SUCCESS && i < found; ++i) {
    const cublasStatus_t st = cublasLtMatmul(lt, desc, &alpha, buf.a, la, buf.b, lb, &beta, c, lc, d, ld, &res[i].algo,
                                             v.workspace ? buf.ws : nullptr, ws, stream);
    statuses.push_back(static_cast<int>(st));
    ran += st == CUBLAS_STATUS_SUCCESS ? 1 : 0;
  }
  out["ran"] = ran;
  out["call_statuses"] = statuses;
  out["sync"] = static_cast<int>(cudaStreamSynchronize(stream));
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(lc),
      cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(desc);
  return out;
}

// The backend's own object: exec/cuda's LtGemm::run with the LtCall ops_gemm.cpp makes for a
// linear layer's FP8 GEMM (its alignment preferences, descriptor cache, candidates in turn), so
// a difference between the raw "backend" variant above and the backend itself shows here.
nlohmann::json probe_lt_gemm(bool fp8, bool bias, int64_t m, int64_t n, int64_t k, const Buffers& buf, size_t ws_bytes,
                             cudaStream_t stream) {
  namespace pc = paralab::exec::cuda;
  nlohmann::json out;
  out["variant"] = std::string("exec/cuda LtGemm::run, ") + (fp8 ? "fp8" : "control: bf16") + (bias ? " + BIAS" : "");
  out["m"] = m, out["n"] = n, out["k"] = k;
  pc::LtCall c;
  c.trans_a = true, c.trans_b = false;
  c.m = m, c.n = n, c.k = k, c.lda = k, c.ldb = k, c.ldc = m;
  c.a_t = c.b_t = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  c.c_t = CUDA_R_16BF;
  c.a = buf.a, c.b = buf.b, c.c = buf.c;
  c.bias = bias ? buf.bias : nullptr;
  if (fp8) {
    c.a_scale = pc::ScalarSlots::at<float>(buf.slots, pc::ScalarSlots::kFp8ScaleInvA);
    c.b_scale = pc::ScalarSlots::at<float>(buf.slots, pc::ScalarSlots::kFp8ScaleInvB);
  }
  try {
    pc::LtGemm lt(stream, ws_bytes);
    out["ran"] = lt.run(c) ? 1 : 0;
    out["shapes_without_algorithm"] = lt.fp8_shapes_without_algorithm();
    out["shapes_refused"] = lt.fp8_shapes_refused();
    out["sync"] = static_cast<int>(cudaStreamSynchronize(stream));
  } catch (const std::exception& e) {
    out["ran"] = 0;
    out["error"] = e.what();
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) out_path = argv[++i];
    else {
      std::fprintf(stderr, "usage: paralab_fp8_probe [--out FILE]\n");
      return 2;
    }
  }
  try {
    int dev = 0, major = 0, minor = 0;
    PROBE_CHECK(cudaGetDevice(&dev));
    PROBE_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    PROBE_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    cudaDeviceProp prop{};
    PROBE_CHECK(cudaGetDeviceProperties(&prop, dev));
    const int64_t M = 6912, N = 1024, K = 2304;  // the largest shape probed: buffers fit every one
    const size_t ws_bytes = size_t{32} << 20;    // the backend's workspace
    Buffers buf;
    PROBE_CHECK(cudaMalloc(&buf.a, static_cast<size_t>(M * K * 2)));
    PROBE_CHECK(cudaMalloc(&buf.b, static_cast<size_t>(K * N * 2)));
    PROBE_CHECK(cudaMalloc(&buf.c, static_cast<size_t>(M * N * 4)));
    PROBE_CHECK(cudaMalloc(&buf.d, static_cast<size_t>(M * N * 4)));
    PROBE_CHECK(cudaMalloc(&buf.bias, static_cast<size_t>(M * 2)));
    PROBE_CHECK(cudaMalloc(reinterpret_cast<void**>(&buf.scales), 256));
    PROBE_CHECK(cudaMalloc(reinterpret_cast<void**>(&buf.scale_a), 256));
    PROBE_CHECK(cudaMalloc(reinterpret_cast<void**>(&buf.scale_b), 256));
    PROBE_CHECK(cudaMalloc(&buf.slots, paralab::exec::cuda::ScalarSlots::kBytes));
    PROBE_CHECK(cudaMalloc(&buf.ws, ws_bytes));
    // e4m3 0x38 = 1.0 (bf16 0x3838 ~ 4.4e-5); scales 1.0: values that cannot overflow.
    PROBE_CHECK(cudaMemset(buf.a, 0x38, static_cast<size_t>(M * K * 2)));
    PROBE_CHECK(cudaMemset(buf.b, 0x38, static_cast<size_t>(K * N * 2)));
    PROBE_CHECK(cudaMemset(buf.c, 0, static_cast<size_t>(M * N * 4)));
    PROBE_CHECK(cudaMemset(buf.bias, 0, static_cast<size_t>(M * 2)));
    const std::array<float, 4> ones{1.f, 1.f, 1.f, 1.f};
    PROBE_CHECK(cudaMemcpy(buf.scales, ones.data(), sizeof ones, cudaMemcpyHostToDevice));
    PROBE_CHECK(cudaMemcpy(buf.scale_a, ones.data(), sizeof(float), cudaMemcpyHostToDevice));
    PROBE_CHECK(cudaMemcpy(buf.scale_b, ones.data(), sizeof(float), cudaMemcpyHostToDevice));
    for (const size_t off : {paralab::exec::cuda::ScalarSlots::kFp8ScaleInvA, paralab::exec::cuda::ScalarSlots::kFp8ScaleInvB})
      PROBE_CHECK(cudaMemcpy(static_cast<char*>(buf.slots) + off, ones.data(), sizeof(float), cudaMemcpyHostToDevice));
    cudaStream_t stream = nullptr;
    PROBE_CHECK(cudaStreamCreate(&stream));
    cublasLtHandle_t lt = nullptr;
    PROBE_CHECK(cublasLtCreate(&lt));

    auto with = [](std::string name, auto set) {
      Variant v;
      v.name = std::move(name);
      set(v);
      return v;
    };
    const std::vector<Variant> variants = {
        with("control: bf16 inputs, in place (as the backend's bf16 calls)", [](Variant& v) { v.bf16_inputs = true; }),
        with("refused call (in place, scales at +8/+12 bytes)", [](Variant&) {}),
        with("backend + BIAS epilogue", [](Variant& v) { v.bias = true; }),
        with("D out of place", [](Variant& v) { v.out_of_place = true; }),
        with("C nullptr, D out of place", [](Variant& v) { v.c_null = true, v.out_of_place = true; }),
        with("C nullptr, D in place", [](Variant& v) { v.c_null = true; }),
        with("backend now (C nullptr, D in place, scales in their own 256 B, alignment preferences)",
             [](Variant& v) { v.c_null = true, v.scales_16b = true, v.align_prefs = true; }),
        with("scales in their own allocations", [](Variant& v) { v.scales_16b = true; }),
        with("no scale pointers", [](Variant& v) { v.scales = false; }),
        with("C and D fp32", [](Variant& v) { v.d_fp32 = true; }),
        with("C and D fp32, beta 1 (wgrad accumulation)", [](Variant& v) { v.d_fp32 = true, v.beta_one = true; }),
        with("fast accumulation", [](Variant& v) { v.fast_accum = true; }),
        with("no workspace", [](Variant& v) { v.workspace = false; }),
        with("out of place + own scales + no workspace",
             [](Variant& v) { v.out_of_place = true, v.scales_16b = true, v.workspace = false; }),
        with("backend's alignment preferences", [](Variant& v) { v.align_prefs = true; }),
    };
    nlohmann::json doc;
    doc["device"] = prop.name;
    doc["compute_capability"] = major * 10 + minor;
    doc["cublaslt_version"] = cublasLtGetVersion();
    doc["cudart_version"] = cublasLtGetCudartVersion();
    doc["probes"] = nlohmann::json::array();
    for (const auto& [m, n, k] : {std::array<int64_t, 3>{M, N, K}, std::array<int64_t, 3>{64, 64, 64}}) {
      for (const Variant& v : variants) doc["probes"].push_back(probe(lt, v, m, n, k, buf, ws_bytes, stream));
      for (const bool fp8 : {false, true})
        for (const bool bias : {false, true}) doc["probes"].push_back(probe_lt_gemm(fp8, bias, m, n, k, buf, ws_bytes, stream));
    }
    const std::string text = doc.dump(2);
    std::printf("%s\n", text.c_str());
    if (!out_path.empty()) std::ofstream(out_path) << text << "\n";
    cublasLtDestroy(lt);
    cudaStreamDestroy(stream);
    for (void* p : {buf.a, buf.b, buf.c, buf.d, buf.bias, static_cast<void*>(buf.scales), static_cast<void*>(buf.scale_a),
                    static_cast<void*>(buf.scale_b), buf.slots, buf.ws})
      cudaFree(p);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paralab_fp8_probe: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
