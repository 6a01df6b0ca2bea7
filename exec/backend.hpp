// paralab exec — the backend interface: what the runtime needs from a device to run a rank's
// StepGraph. The runtime (exec/runtime.hpp) owns scheduling (a worker thread per stream,
// dependencies, memory events, the watchdog); a backend owns memory, the math of every op
// kind, the communicators and the clock.
//
// Synchronous backends (cpu) return from run() when the op has finished; the runtime then
// marks it done and releases dependents. Asynchronous backends (cuda) enqueue on a per-stream
// queue and return; the runtime then calls wait_for() on a dependent's stream once the
// dependency is issued (cudaStreamWaitEvent), and op_begin/op_end record events whose times
// timings() resolves after the step. Buffer frees after an op are issued in stream order, so
// stream-ordered allocators (cudaFreeAsync) keep them valid until the op completes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "exec/comm.hpp"
#include "exec/device_identity.hpp"
#include "exec/plan.hpp"
#include "results/step_result.hpp"

namespace paralab::exec {

// One op as the backend runs it: pointers of its views (the rank's shard offsets applied,
// in the order of Op::reads / Op::writes), its resolved plan and how to wait.
struct OpCall {
  const Op& op;
  const OpPlan& plan;
  std::span<void* const> reads;
  std::span<void* const> writes;
  const WaitPolicy& wait;
  int64_t step = 1;  // optimizer step number, from 1 (Adam's bias correction)
};

class Backend {
 public:
  virtual ~Backend() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  [[nodiscard]] virtual bool synchronous() const = 0;

  // Once per rank, on the main thread, before anything runs: communicators (collective over
  // `world`: every rank creates plan.comms in order), streams, workspaces.
  virtual void setup(const RankPlan& plan, Transport& world) = 0;
  // The communicators created by setup, index = RankPlan::comms slot (null where this rank is
  // not a member). Verification self-checks every one of them.
  [[nodiscard]] virtual std::vector<GroupComm*> comms() = 0;

  // Memory (thread-safe). Buffers are 64-byte aligned.
  virtual void* allocate(int64_t bytes) = 0;
  virtual void deallocate(void* p, int64_t bytes) = 0;
  // Host (pinned) memory for Buffer::host (optimizer offload); the device may address it.
  // Default: allocate (a host backend's memory is host memory).
  virtual void* allocate_host(int64_t bytes) { return allocate(bytes); }
  virtual void deallocate_host(void* p, int64_t bytes) { deallocate(p, bytes); }
  virtual void fill(void* p, const Buffer& b, const BufferPlan& how) = 0;
  virtual void to_host(void* host, const void* p, int64_t bytes) = 0;
  virtual void from_host(void* p, const void* host, int64_t bytes) = 0;
  // Optional: writes the parameter values (exec/fill.hpp param_value) of the region's local
  // elements [local0, local0 + n) to `p` in dtype t, on the device. false: not offered, the
  // runtime makes them on the host and copies them (from_host).
  virtual bool fill_params(void* p, DType t, const ParamRegion& region, int64_t local0, int64_t n) {
    (void)p, (void)t, (void)region, (void)local0, (void)n;
    return false;
  }
  // Optional: dst (fp32, n elements) = src (dtype t) widened, on the device. false: not offered.
  virtual bool widen_copy(float* dst, const void* src, DType t, int64_t n) {
    (void)dst, (void)src, (void)t, (void)n;
    return false;
  }

  // Execution, called by the worker of `stream` in stream order. attach_stream is called once by
  // each worker thread before its first op of a step (an asynchronous backend binds the thread
  // to its stream: allocations, fills and copies made on that thread are ordered on it).
  virtual void attach_stream(Stream stream) { (void)stream; }
  virtual void wait_for(Stream stream, OpId dep) { (void)stream, (void)dep; }
  virtual void run(Stream stream, const OpCall& call) = 0;

  // Timing: begin_timing() sets the time origin (right after a world barrier); op times and
  // now_us() are microseconds since it.
  virtual void begin_timing() = 0;
  virtual void op_begin(Stream stream, OpId op) = 0;
  virtual void op_end(Stream stream, OpId op) = 0;
  [[nodiscard]] virtual double now_us() const = 0;
  // After the step (all streams drained): start/end of every op run since begin_timing().
  virtual void timings(int64_t rank, std::vector<OpTiming>& out) = 0;
  // Waits until everything issued on every stream has finished. An asynchronous backend bounds
  // the wait by the watchdog (set_watchdog, called once by the runtime).
  virtual void synchronize() = 0;
  virtual void set_watchdog(double seconds) { (void)seconds; }
  // Asynchronous backends: the per-token losses of this step's xent_loss outputs (sum, count),
  // after synchronize(); synchronous backends leave it to the runtime (it reads them per op).
  virtual void collect_loss(double& sum, int64_t& tokens) { (void)sum, (void)tokens; }
  // The dynamic fp16 loss scale now (kernels::LossScaleState::scale; 1 for a backend that keeps
  // none). --verify reads it for the cross-entropy gradient's reference; the step is not timed then.
  [[nodiscard]] virtual double loss_scale() { return 1.0; }
  // Device measurements reported per rank beside the IR's memory accounting (e.g. allocator
  // high-water marks); names are JSON keys.
  [[nodiscard]] virtual std::map<std::string, double> device_stats() const { return {}; }
  // The device this backend runs on, where it is not the host (GPUs: name, SMs, clock,
  // memory); known after setup(). The CPU backend has none: the host describes itself
  // (analysis/host_info.hpp).
  [[nodiscard]] virtual std::optional<DeviceIdentity> device_identity() const { return std::nullopt; }
};

}  // namespace paralab::exec
