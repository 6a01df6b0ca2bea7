// paralab exec/cuda — the CUDA backend's step timing and its one synchronization per step
// (docs/cuda_backend.md): every op's begin and end events read against the step's origin
// event, the poll that waits for the streams (so a hung peer is reported by the watchdog, with
// where each stream stands) and checks NCCL's asynchronous errors, the loss and the device's
// memory statistics.
#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "exec/cuda/cuda_backend_impl.hpp"
#include "exec/cuda/kernel_families.hpp"
#include "exec/error.hpp"
#include "ir/accounting.hpp"

namespace paralab::exec::cuda {

void CudaBackend::begin_timing() {
  PARALAB_CU(cudaSetDevice(device_));
  cursor_.fill(0);
  std::fill(ran_.begin(), ran_.end(), 0);
  loss_tokens_ = 0;
  PARALAB_CU(cudaMemsetAsync(loss_acc_, 0, sizeof(double), host_stream_));
  uint64_t zero = 0;
  PARALAB_CU(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &zero));
  PARALAB_CU(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &zero));
  // Every stream is idle: an event recorded now on the host stream is the step's GPU origin.
  PARALAB_CU(cudaEventRecord(origin_ev_, host_stream_));
  PARALAB_CU(cudaEventSynchronize(origin_ev_));
  origin_host_ = std::chrono::steady_clock::now();
}

void CudaBackend::timings(int64_t rank, std::vector<OpTiming>& out) {
  for (OpId i = 0; i < ran_.size(); ++i) {
    if (!ran_[i]) continue;
    float b = 0, e = 0;
    PARALAB_CU(cudaEventElapsedTime(&b, origin_ev_, begin_ev_[i]));
    PARALAB_CU(cudaEventElapsedTime(&e, origin_ev_, end_ev_[i]));
    out.push_back({rank, i, 1e3 * static_cast<double>(b), 1e3 * static_cast<double>(e)});
  }
}

std::string CudaBackend::describe_pending() const {
  const StepGraph& g = *plan_->graph;
  std::string out;
  for (int si = 0; si < kStreams; ++si) {
    if (!streams_[static_cast<size_t>(si)].stream) continue;
    const auto& order = g.streams[static_cast<size_t>(si)];
    std::string where = "finished";
    for (OpId id : order) {
      if (!ran_[id]) break;
      if (cudaEventQuery(end_ev_[id]) == cudaErrorNotReady) {
        const Op& op = g.op(id);
        where = "at op " + op_label(op);
        if (const auto* c = op.collective())
          where += " (" + std::string(to_string(c->kind)) + " of " + std::to_string(c->bytes) + " B over the " +
                   std::string(to_string(c->group)) + " group)";
        else if (const auto* p = op.p2p())
          where += " (" + std::string(to_string(op.kind)) + " of " + std::to_string(p->bytes) + " B, " +
                   std::string(to_string(p->group)) + " group, tag " + std::to_string(p->tag) + ")";
        break;
      }
    }
    (void)cudaGetLastError();
    out += std::string(out.empty() ? "" : "; ") + std::string(to_string(static_cast<Stream>(si))) + " " + where;
  }
  return out;
}

void CudaBackend::synchronize() {
  PARALAB_CU(cudaSetDevice(device_));
  const auto t0 = std::chrono::steady_clock::now();
  int64_t sleep_us = 0;
  for (;;) {
    bool busy = false;
    for (const StreamRes& r : streams_) {
      if (!r.stream) continue;
      const cudaError_t q = cudaStreamQuery(r.stream);
      if (q == cudaErrorNotReady) busy = true;
      else if (q != cudaSuccess) throw ExecError(rank_, std::string("a CUDA error surfaced while the step ran: ") +
                                                            cudaGetErrorName(q) + ": " + cudaGetErrorString(q) +
                                                            " (streams: " + describe_pending() + ")");
    }
    if (!busy) break;
    for (const auto& c : comms_)
      if (c) {
        try {
          check_async(*c);
        } catch (const std::exception& e) {
          throw ExecError(rank_, std::string(e.what()) + " (streams: " + describe_pending() + ")");
        }
      }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (waited > watchdog_s_)
      throw WatchdogError(rank_, "watchdog: the step's GPU work did not finish within " + std::to_string(watchdog_s_) +
                                     " s of the last op being issued; " + describe_pending());
    sleep_us = std::min<int64_t>(sleep_us + 20, 2000);
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
  }
  if (const std::string e = take_host_step_error(); !e.empty())
    throw ExecError(rank_, "a host optimizer step (optimizer offload) failed: " + e);
  size_t free_b = 0, total_b = 0;
  PARALAB_CU(cudaMemGetInfo(&free_b, &total_b));
  used_after_step_ = static_cast<double>(total_b - free_b);
}

void CudaBackend::collect_loss(double& sum, int64_t& tokens) {
  double v = 0;
  PARALAB_CU(cudaMemcpyAsync(&v, loss_acc_, sizeof v, cudaMemcpyDeviceToHost, host_stream_));
  PARALAB_CU(cudaStreamSynchronize(host_stream_));
  sum += v;
  tokens += loss_tokens_.load();
}

std::optional<DeviceIdentity> CudaBackend::device_identity() const {
  DeviceIdentity d;
  d.name = prop_.name;
  d.cc_major = prop_.major;
  d.cc_minor = prop_.minor;
  d.sm_count = prop_.multiProcessorCount;
  d.memory_gib = static_cast<double>(prop_.totalGlobalMem) / kGiB;
  d.l2_mib = static_cast<double>(prop_.l2CacheSize) / (1024.0 * 1024.0);
  // CUDA 13 keeps the clocks as attributes only (kHz). Memory: double data rate, bus in bits.
  int sm_khz = 0, mem_khz = 0, bus_bits = 0;
  PARALAB_CU(cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, device_));
  PARALAB_CU(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, device_));
  PARALAB_CU(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device_));
  d.sm_clock_mhz = sm_khz * 1e-3;
  d.mem_bw_gbps = 2.0 * mem_khz * 1e3 * (bus_bits / 8.0) * 1e-9;
  return d;
}

std::map<std::string, double> CudaBackend::device_stats() const {
  std::map<std::string, double> m;
  m["device"] = device_;
  m["compute_capability"] = prop_.major * 10 + prop_.minor;
  m["device_total_gib"] = static_cast<double>(prop_.totalGlobalMem) / kGiB;
  m["planned_peak_gib"] = planned_.peak_total() / kGiB;
  uint64_t used = 0, reserved = 0;
  if (pool_ && cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &used) == cudaSuccess &&
      cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &reserved) == cudaSuccess) {
    m["pool_used_high_gib"] = static_cast<double>(used) / kGiB;
    m["pool_reserved_high_gib"] = static_cast<double>(reserved) / kGiB;
  }
  m["device_used_after_step_gib"] = used_after_step_ / kGiB;
  size_t ws = 0;
  for (const StreamRes& r : streams_)
    if (r.lt) ws += r.lt->workspace_bytes();
  m["cublaslt_workspace_gib"] = static_cast<double>(ws) / kGiB;
  m["cross_stream_waits"] = static_cast<double>(waits_.kept);
  m["ir_dependencies"] = static_cast<double>(waits_.ir_deps);
  int nccl = 0;
  for (const auto& c : comms_) nccl += c && c->nccl ? 1 : 0;
  m["nccl_communicators"] = nccl;
  m["fp8_fallback_gemms"] = static_cast<double>(fp8_fallbacks_.load());
  m["fp8_bias_kernel_gemms"] = static_cast<double>(fp8_bias_kernels_.load());
  int64_t no_algo = 0, refused = 0;
  for (const StreamRes& r : streams_)
    if (r.lt) no_algo += r.lt->fp8_shapes_without_algorithm(), refused += r.lt->fp8_shapes_refused();
  m["fp8_shapes_without_algorithm"] = static_cast<double>(no_algo);
  m["fp8_shapes_refused_at_call"] = static_cast<double>(refused);
  for (const auto& [k, v] : setup_s_) m[k] = v;
  return m;
}

}  // namespace paralab::exec::cuda
