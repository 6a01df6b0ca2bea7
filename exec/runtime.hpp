// paralab exec — the runtime: runs one rank's StepGraph for real on a backend.
//
// A worker thread per stream walks the stream's ops in program order; before an op it waits
// for the op's cross-stream dependencies (Op::deps), allocates the buffers the op's memory
// events allocate (resident buffers exist from initialize() on), runs it on the backend
// (timed), then frees what the op's events free. Live bytes are tracked by category exactly as
// the events say, and the peak is measured (resident + transient), as the simulator replays
// them. Any failure on any stream stops the rank's other streams; every wait (for a
// dependency, for a peer) is bounded by the watchdog, which reports the rank, the op and what
// it waits for. See docs/executor.md.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "exec/backend.hpp"
#include "exec/comm.hpp"
#include "exec/plan.hpp"
#include "exec/slowdown.hpp"

namespace paralab::exec {

// Test-only fault injection (`PARALAB_EXEC_FAULT`, parsed by the command line): on `rank`, at
// op `op` (or the first op of kind `kind`) of step `step`, do `action`.
struct FaultInjection {
  enum class Action : uint8_t { none, throw_error, kill, hang, drop };
  Action action = Action::none;
  int64_t rank = -1;
  std::optional<OpId> op;
  std::optional<OpKind> kind;
  int64_t step = 1;
};

// Verification hooks around ops (exec/verify.hpp); called on the op's worker thread.
class OpObserver {
 public:
  virtual ~OpObserver() = default;
  virtual bool wants(const Op& op) = 0;
  virtual void before(const OpCall& call) = 0;  // inputs are ready, outputs not yet written
  virtual void after(const OpCall& call) = 0;   // the op has finished
};

struct RuntimeOptions {
  // Longest wait before the run fails: a communication op waiting for its peers this long, or a
  // dependency wait during which no op of the rank finished this long (a dependency that is
  // busy computing is progress, not a hang). Must exceed the longest single op.
  double watchdog_s = 60;
  FaultInjection fault;
  OpObserver* observer = nullptr;
  // This rank slowed (exec/slowdown.hpp): its compute ops run this many times, the extra runs
  // into scratch, all inside the op's timing. Empty: every op once.
  SlowdownPlan slowdown;
};

struct MemoryStats {
  std::array<double, kMemCategories> resident{};  // bytes of resident buffers by category
  std::array<double, kMemCategories> at_peak{};   // transient bytes by category at the peak
  double peak_transient = 0;
  double peak_time_us = 0;
  OpId peak_op = 0;
  [[nodiscard]] double resident_total() const;
  [[nodiscard]] double peak_total() const { return resident_total() + peak_transient; }
};

struct StepRun {
  std::vector<OpTiming> ops;
  MemoryStats memory;
  double loss_sum = 0;      // sum of per-token losses computed on this rank (xent_loss outputs)
  int64_t loss_tokens = 0;
  int64_t ops_run = 0;
  int64_t extra_runs = 0;   // a slowed rank's runs beyond each op's first (RuntimeOptions::slowdown)
  double wall_s = 0;        // from the time origin to the last stream's end
  // This rank's clock against rank 0's (µs); `ops` and the memory peak's time are already on
  // rank 0's clock (exec/clock_sync.hpp).
  ClockOffset clock;
};

class Runtime {
 public:
  Runtime(const RankPlan& plan, Backend& backend, Transport& world, RuntimeOptions opts);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Allocates and fills the resident buffers (weights, gradients, optimizer state).
  void initialize();
  // One optimizer step (collective: every rank calls it). Throws ExecError/WatchdogError.
  StepRun run_step(int64_t step);

  // Host copy of a live buffer's bytes (resident buffers between steps; verification).
  [[nodiscard]] std::vector<uint8_t> read_buffer(BufferId b) const;
  [[nodiscard]] const RankPlan& plan() const { return plan_; }
  [[nodiscard]] int core_turns() const;  // turns of this host its ops take, 0: none
  // Whether the threads taking those turns ran under SCHED_BATCH (exec/core_turns.hpp); false
  // without turns, or when the system refused it to one of them.
  [[nodiscard]] bool batch_scheduling() const { return turns_ && !batch_refused_.load(); }

 private:
  enum class Phase : uint8_t { idle, waiting, running, finished };
  // One per stream. A worker waiting for an op sleeps on its own stream's condition variable,
  // and a finished op wakes only the streams waiting for it: one broadcast per op woke every
  // idle worker (3-4 per rank), which cost the compute stream ~10 us per op on the CPU
  // backend (docs/executor.md, "Waking a waiting stream").
  struct StreamState {
    std::atomic<OpId> current{kNoOp};
    std::atomic<OpId> waiting_on{kNoOp};  // seq_cst: pairs with an op's completion (worker)
    std::atomic<uint8_t> phase{0};
    std::condition_variable cv;  // under mu_
  };
  class OpWait;

  void worker(Stream s, int64_t step, StepRun& out, std::mutex& out_mu);
  void wait_dependency(const Op& op, OpId dep);
  void allocate(BufferId b, OpId by);
  void release(BufferId b);
  void apply_fault(const Op& op, int64_t step);
  void fail(const std::string& message, bool watchdog);
  void wake_waiters(OpId done);
  void check_cancel() const;
  [[nodiscard]] std::string describe_streams() const;
  [[nodiscard]] std::string describe_comm(const Op& op) const;
  // Where op `id` stands; an op waiting for another (or behind its stream's current op) says
  // where that one stands, along the chain (at most kStreams hops), so a stall names the op
  // at its root, whichever waiter the watchdog caught first.
  [[nodiscard]] std::string describe_op_state(OpId id, int hops = 0) const;

  const RankPlan& plan_;
  const StepGraph& g_;
  Backend& backend_;
  Transport& world_;
  RuntimeOptions opts_;
  // The node's core turns (exec/core_turns.hpp), or null. Only a synchronous backend's ops run
  // on the host's cores; an asynchronous one's threads only enqueue device work.
  CoreTurns* turns_;
  std::atomic<bool> batch_refused_{false};
  std::optional<OpId> fault_op_;
  std::unique_ptr<RepeatScratch> repeat_;  // with a slowdown: where the extra runs write

  std::vector<std::atomic<void*>> ptr_;   // per buffer, null when not live
  std::vector<std::atomic<uint8_t>> state_;  // per op: 0 pending, 1 issued, 2 done
  std::array<StreamState, kStreams> streams_;
  mutable std::mutex mu_;
  std::atomic<bool> failed_{false};
  std::atomic<int64_t> last_progress_ns_{0};  // steady clock of the last op completion
  // Observer calls in progress (--verify's CPU references): the rank's own host work, never a
  // stall. A reference of a long attention can take minutes on one core.
  std::atomic<int> observing_{0};
  std::string error_;
  bool error_is_watchdog_ = false;
  bool leak_ = false;  // after a failure, in-flight transfers may still target live buffers

  std::mutex mem_mu_;
  std::array<double, kMemCategories> live_{};
  MemoryStats mem_;
};

}  // namespace paralab::exec
