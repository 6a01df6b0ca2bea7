// paralab exec/cuda — internals shared by the backend's op files: the per-stream resources
// (CUDA stream, cuBLASLt handle, workspace and descriptor cache), stream-ordered scratch, and
// the context an op is enqueued in. Host-only (g++).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "exec/backend.hpp"
#include "exec/cuda/check.hpp"
#include "exec/cuda/comm_plan.hpp"
#include "exec/cuda/device_ops.hpp"
#include "exec/cuda/gemm_plan.hpp"
#include "exec/cuda/nccl_comm.hpp"
#include "ir/model_shape.hpp"
#include "kernels/dtype.hpp"

namespace paralab::exec::cuda {

inline dev::T dt(DType t) { return static_cast<dev::T>(static_cast<int>(t)); }

// Device scratch from the stream-ordered pool, released in stream order at scope exit (the
// pool serves it again without a cudaMalloc after the first use).
class Scratch {
 public:
  Scratch(int64_t bytes, cudaStream_t stream) : stream_(stream) {
    PARALAB_CU(cudaMallocAsync(&p_, static_cast<size_t>(bytes > 0 ? bytes : 1), stream));
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    if (p_) (void)cudaFreeAsync(p_, stream_);
  }
  [[nodiscard]] void* get() const { return p_; }
  [[nodiscard]] float* f() const { return static_cast<float*>(p_); }

 private:
  void* p_ = nullptr;
  cudaStream_t stream_;
};

// Largest power of two (<= 256) dividing every batch's address (the pointer, and with batch > 1
// its stride in bytes): what cuBLASLt's MIN_ALIGNMENT preferences are told, so that it does not
// pick an algorithm that assumes more alignment than the views inside qkv/ctx have.
inline uint32_t alignment(const void* p, int64_t stride_bytes = 0, int64_t batch = 1) {
  uint64_t a = reinterpret_cast<uintptr_t>(p);
  if (batch > 1) a |= static_cast<uint64_t>(stride_bytes);
  uint32_t al = 256;
  while (al > 1 && (a % al) != 0) al >>= 1;
  return al;
}

// One cuBLASLt matmul in column-major terms (a BlasCall with pointers and types).
struct LtCall {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0, batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  cudaDataType_t a_t = CUDA_R_32F, b_t = CUDA_R_32F, c_t = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  float beta = 0.0f;
  const void* bias = nullptr;  // BIAS epilogue (type = c_t)
  const float* a_scale = nullptr;  // fp8 dequantization scales (device)
  const float* b_scale = nullptr;
};

// cuBLASLt on one stream: handle, workspace, and per-shape descriptors and the heuristic's
// algorithm, cached (the same shapes recur every layer and micro-batch). One per stream: no locks.
class LtGemm {
 public:
  LtGemm(cudaStream_t stream, size_t workspace_bytes);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;
  // Enqueues the matmul. Returns false (nothing enqueued) only for fp8 calls the library has no
  // algorithm for, or refuses at the call (the caller falls back); throws CallError otherwise.
  bool run(const LtCall& c);
  [[nodiscard]] size_t workspace_bytes() const { return ws_bytes_; }
  // FP8 shapes (cache entries) the heuristic had no algorithm for, and those whose every offered
  // algorithm cublasLtMatmul refused (device_stats: where an FP8 run's fallbacks come from).
  [[nodiscard]] int64_t fp8_shapes_without_algorithm() const { return fp8_no_algo_; }
  [[nodiscard]] int64_t fp8_shapes_refused() const { return fp8_refused_; }
  // True once an FP8 call of this shape (m, n, k, output type, accumulate, bias epilogue) found
  // no algorithm or had each refused: the caller then skips quantizing for a call that cannot run.
  [[nodiscard]] bool fp8_refused(const LtCall& c) const { return fp8_refused_shapes_.count(fp8_shape(c)) > 0; }

 private:
  struct Entry {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    std::vector<cublasLtMatmulAlgo_t> algos;  // the heuristic's, best first; [0] is used
    bool ok = false;
  };
  using Key = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                         int64_t, int, int, int, int, int, int, int, int>;
  cudaStream_t stream_;
  cublasLtHandle_t handle_ = nullptr;
  void* ws_ = nullptr;
  size_t ws_bytes_ = 0;
  using Fp8Shape = std::tuple<int64_t, int64_t, int64_t, int, bool, bool>;
  static Fp8Shape fp8_shape(const LtCall& c) {
    return {c.m, c.n, c.k, static_cast<int>(c.c_t), c.beta != 0.0f, c.bias != nullptr};
  }
  std::map<Key, Entry> cache_;
  int64_t fp8_no_algo_ = 0, fp8_refused_ = 0;
  std::set<Fp8Shape> fp8_refused_shapes_;
};

// The stream's per-op device scalars (StreamRes::scalars), one fixed slot per use; the ops of a
// stream run in its order, so each op's slots are its own while it runs. The FP8 scale factors
// cuBLASLt reads (A/B_SCALE_POINTER) sit 256 B apart, each aligned as its own cudaMalloc would
// be, as Transformer Engine's scale_inv tensors are: cuBLASLt refuses FP8 calls with them at +8
// and +12 bytes of one allocation, and its documentation states no alignment for them, so the
// backend gives them the most any allocation has.
struct ScalarSlots {
  static constexpr size_t kBytes = 1024;
  static constexpr size_t kFp8Amax = 0;         // float[2]: amax of A, of B (our kernels only)
  static constexpr size_t kOptimizerFound = 32;  // int32: the step's overflow flag, as read
  static constexpr size_t kOptimizerDivisor = 36;  // float: loss scale x clipping divisor
  static constexpr size_t kOverflowFound = 40;   // int32: one overflow check's flag
  static constexpr size_t kFp8ScaleInvA = 256;   // float: A's dequantization scale (cuBLASLt)
  static constexpr size_t kFp8ScaleInvB = 512;   // float: B's
  static_assert(kFp8ScaleInvA % 256 == 0 && kFp8ScaleInvB % 256 == 0, "a scale as aligned as its own cudaMalloc");
  static_assert(kOverflowFound + 4 <= kFp8ScaleInvA && kFp8ScaleInvB + 4 <= kBytes, "slots apart, inside the buffer");
  template <typename T>
  static T* at(void* scalars, size_t offset) {
    return reinterpret_cast<T*>(static_cast<char*>(scalars) + offset);
  }
};

struct StreamRes {
  Stream id = Stream::compute;
  cudaStream_t stream = nullptr;
  std::unique_ptr<LtGemm> lt;
  void* scalars = nullptr;  // ScalarSlots::kBytes of per-op device scalars
};

// What an op is enqueued with.
struct CudaOpContext {
  const RankPlan& plan;
  const ModelShape& shape;
  const Scenario& scenario;
  StreamRes& res;
  void* scaler = nullptr;          // device kernels::LossScaleState
  double* loss_acc = nullptr;      // device: sum of this step's per-token losses
  std::atomic<int64_t>* loss_tokens = nullptr;
  const std::vector<std::unique_ptr<Comm>>* comms = nullptr;  // index = job_nccl_comms
  const std::vector<OpComm>* op_comms = nullptr;
  const std::vector<GemmPlan>* gemm_plans = nullptr;           // index = OpId
  bool fp8 = false;                                            // FP8 tensor cores present
  std::atomic<int64_t>* fp8_fallbacks = nullptr;     // FP8 GEMM calls run in bf16 instead
  std::atomic<int64_t>* fp8_bias_kernels = nullptr;  // FP8 GEMM calls whose bias our kernel added
  [[nodiscard]] cudaStream_t stream() const { return res.stream; }
};

void run_gemm(const OpCall& call, CudaOpContext& ctx);
void run_attention(const OpCall& call, CudaOpContext& ctx);
void run_kernel(const OpCall& call, CudaOpContext& ctx);
void run_comm(const OpCall& call, CudaOpContext& ctx);

}  // namespace paralab::exec::cuda
