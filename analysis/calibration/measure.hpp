// paralab — what `paralab calibrate` measures, with the executor's own code paths.
//
// Compute ops are measured by replaying a rank's StepGraph on the backend that `execute` uses
// (exec/backend.hpp): the ops run in program order on one thread, with the runtime's memory
// events (buffers allocated before the op that allocates them, freed after the op that frees
// them, resident state allocated and filled first), so an op finds its inputs where the real
// step leaves them (just written, warm in cache) and pays what the real step pays for fresh
// buffers. Communication ops are skipped (their outputs hold whatever the allocation held);
// the kernels' speed does not depend on the values. Each op is timed by the backend's own
// clock (op_begin / op_end: steady_clock on the CPU, CUDA events on a GPU).
//
// Communication is measured on the communicators the backend creates for a job (the MPI
// transport on the CPU backend, NCCL on CUDA) with every rank of the calibration job taking
// part, one call at a time after a barrier.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/calibration/fit.hpp"
#include "analysis/stats.hpp"
#include "exec/backend.hpp"
#include "exec/comm.hpp"
#include "ir/step_ir.hpp"

namespace paralab::calib {

// What a calibration table keys a compute op by (sim/compute/profile.hpp): GEMMs by
// (m, n, k, batch, math), every other kind by the bytes it moves.
struct OpKey {
  OpKind kind = OpKind::gemm;
  int64_t m = 0, n = 0, k = 0, batch = 0;  // GEMMs
  MathMode math = MathMode::f32;           // GEMMs and fused attention
  int64_t bytes = 0;                       // other kinds: round(op.bytes)
  auto operator<=>(const OpKey&) const = default;
  [[nodiscard]] std::string str() const;   // "gemm 512x768x512 b1 f32", "layernorm_fwd 1048576 B"
};
OpKey op_key(const Op& op);


// Every measured time of one key, with the op's work for the fits.
struct OpSamples {
  OpKey key;
  double flops = 0, bytes = 0;
  double exec_flops = 0;       // what the simulator's model executes (fused causal attention: half)
  std::string origin;          // "scenario quickstart" | "sweep"
  std::vector<double> us;      // one per timed run
  [[nodiscard]] double median_us() const;
  [[nodiscard]] double quantile_us(double q) const;
};

// Replays rank `rank` of `ir` on a fresh backend of kind `backend` in a world of one process
// (compute ops need no peers). Not thread-safe; one per thread.
class Replayer {
 public:
  Replayer(const StepIR& ir, int64_t rank, const std::string& backend);
  ~Replayer();
  Replayer(const Replayer&) = delete;
  Replayer& operator=(const Replayer&) = delete;

  // One pass over the graph in program order: every compute op for which `want(op)` is true
  // runs (timed); memory events of every op are applied. Appends (op id, microseconds).
  void pass(const std::function<bool(const Op&)>& want, std::vector<std::pair<OpId, double>>& out);
  // Time ops by the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID) instead of the
  // backend's clock: the work an op does, without the time other threads held its core. For a
  // host with more ranks than cores, whose simulator shares the cores itself (docs/
  // calibration.md, "Shared cores"). The CPU backend only (it runs ops on the calling thread).
  void use_thread_cpu_time();
  [[nodiscard]] const StepGraph& graph() const;
  // The device the backend runs on where it is not the host (Backend::device_identity).
  [[nodiscard]] std::optional<exec::DeviceIdentity> device_identity() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Binds the calling thread to `stream` on backends that have such a binding (CUDA: its
// allocations and copies are then ordered on that stream); a no-op otherwise.
void attach_stream(exec::Backend& backend, Stream stream);

// ---- Communication ---------------------------------------------------------------------------

// One call to time: a pattern, the element type (bf16/f16 reduce through user operators in
// MPI, slower than fp32) and the bytes per rank as the IR counts them.
struct CommCase {
  CommPattern pattern = CommPattern::all_reduce;
  DType dtype = DType::f32;
  int64_t bytes = 0;
  auto operator<=>(const CommCase&) const = default;
};

struct CommPoint {
  CommPattern pattern = CommPattern::all_reduce;
  DType dtype = DType::f32;
  int64_t group = 2;
  int64_t bytes = 0;
  std::vector<double> us;  // per repetition and member
  double weight = 0;       // how often the measured scenarios make this call (0: sweep only)
  [[nodiscard]] double median_us() const;
};

// Times `cases` on `comm` (every member calls this with the same arguments): `reps` calls each
// after a warm-up, each preceded by a barrier on the communicator (a blocking control
// all-reduce). `backend` allocates the buffers (device memory on a GPU). Returns this member's
// times; rank 0 of the job pools the members'.
std::vector<CommPoint> measure_comm(exec::GroupComm& comm, exec::Backend& backend, const std::vector<CommCase>& cases,
                                    int reps, const std::function<void()>& tick = {});

}  // namespace paralab::calib
