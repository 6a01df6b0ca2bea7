// paralab exec/cuda — the CUDA backend's class, shared by its two files: cuda_backend.cpp
// (setup, memory, fills, issuing ops) and cuda_backend_sync.cpp (timing, the step's one
// synchronization, the loss and device statistics). Internal: include cuda_backend.hpp to
// make one (docs/cuda_backend.md).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exec/cuda/check.hpp"
#include "exec/cuda/comm_plan.hpp"
#include "exec/cuda/cuda_ops.hpp"
#include "exec/cuda/gemm_plan.hpp"
#include "exec/cuda/nccl_comm.hpp"
#include "kernels/loss_scale.hpp"

namespace paralab::exec::cuda {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

class CudaBackend;
// The backend and IR stream a worker thread drives (attach_stream); -1: the main thread.
inline thread_local CudaBackend* tls_owner = nullptr;
inline thread_local int tls_stream = -1;

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const StepIR& ir) : ir_(ir) {}
  ~CudaBackend() override;

  [[nodiscard]] std::string_view name() const override { return "cuda"; }
  [[nodiscard]] bool synchronous() const override { return false; }

  void setup(const RankPlan& plan, Transport& world) override;
  std::vector<GroupComm*> comms() override {
    std::vector<GroupComm*> out;
    for (auto& c : blocking_) out.push_back(c.get());
    return out;
  }

  void* allocate(int64_t bytes) override;
  void deallocate(void* p, int64_t bytes) override;
  void* allocate_host(int64_t bytes) override;
  void deallocate_host(void* p, int64_t bytes) override;
  void fill(void* p, const Buffer& b, const BufferPlan& how) override;
  bool fill_params(void* p, DType t, const ParamRegion& region, int64_t local0, int64_t n) override;
  bool widen_copy(float* dst, const void* src, DType t, int64_t n) override;
  void to_host(void* host, const void* p, int64_t bytes) override;
  [[nodiscard]] double loss_scale() override {
    kernels::LossScaleState st;  // the scale is the state's first member, as the optimizer reads it
    to_host(&st, scaler_, sizeof st);
    return st.scale;
  }
  void from_host(void* p, const void* host, int64_t bytes) override;

  void attach_stream(Stream s) override {
    tls_owner = this;
    tls_stream = static_cast<int>(s);
    PARALAB_CU(cudaSetDevice(device_));
  }
  void set_watchdog(double seconds) override { watchdog_s_ = seconds; }
  void wait_for(Stream stream, OpId dep) override;
  void run(Stream stream, const OpCall& call) override;

  void begin_timing() override;
  void op_begin(Stream stream, OpId op) override {
    PARALAB_CU(cudaEventRecord(begin_ev_[op], streams_[static_cast<size_t>(stream)].stream));
  }
  void op_end(Stream stream, OpId op) override {
    PARALAB_CU(cudaEventRecord(end_ev_[op], streams_[static_cast<size_t>(stream)].stream));
    ran_[op] = 1;
    ++cursor_[static_cast<size_t>(stream)];
  }
  [[nodiscard]] double now_us() const override {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin_host_).count();
  }
  void timings(int64_t rank, std::vector<OpTiming>& out) override;
  void synchronize() override;
  void collect_loss(double& sum, int64_t& tokens) override;
  [[nodiscard]] std::map<std::string, double> device_stats() const override;
  [[nodiscard]] std::optional<DeviceIdentity> device_identity() const override;

 private:
  // The stream of the calling thread: a worker's IR stream, else the host stream.
  [[nodiscard]] cudaStream_t current_stream(bool* host) const {
    if (tls_owner == this && tls_stream >= 0) {
      *host = false;
      return streams_[static_cast<size_t>(tls_stream)].stream;
    }
    *host = true;
    PARALAB_CU(cudaSetDevice(device_));
    return host_stream_;
  }
  [[nodiscard]] std::string describe_pending() const;

  const StepIR& ir_;
  const RankPlan* plan_ = nullptr;
  int64_t rank_ = 0;
  int device_ = 0;
  cudaDeviceProp prop_{};
  bool fp8_ = false;
  double watchdog_s_ = 60;
  std::array<StreamRes, kStreams> streams_{};
  cudaStream_t host_stream_ = nullptr;
  void* scaler_ = nullptr;
  double* loss_acc_ = nullptr;
  std::atomic<int64_t> loss_tokens_{0};
  std::atomic<int64_t> fp8_fallbacks_{0};
  std::atomic<int64_t> fp8_bias_kernels_{0};
  std::vector<CommSpec> specs_;
  std::vector<std::unique_ptr<Comm>> comms_;  // index = specs_
  std::vector<std::unique_ptr<GroupComm>> blocking_;  // index = RankPlan::comms slot
  std::vector<OpComm> op_comms_;
  std::vector<GemmPlan> gemm_plans_;
  WaitPlan waits_;
  std::vector<cudaEvent_t> begin_ev_, end_ev_;
  cudaEvent_t origin_ev_ = nullptr;
  std::vector<uint8_t> ran_;
  std::array<size_t, kStreams> cursor_{};
  std::chrono::steady_clock::time_point origin_host_ = std::chrono::steady_clock::now();
  MemoryBreakdown planned_;
  // Wall seconds of setup()'s parts (device_stats "setup_<part>_s"): where a slow start goes.
  std::map<std::string, double> setup_s_;
  std::atomic<int64_t> live_bytes_{0};
  double used_after_step_ = 0;
  cudaMemPool_t pool_ = nullptr;
};

}  // namespace paralab::exec::cuda
