// paralab exec — communication interfaces of the runtime.
//
// `Transport` is the process world (MPI_COMM_WORLD, or one rank without MPI): barriers, the
// splits that create group communicators, small control reductions, gathering results to
// rank 0 and aborting every rank. `GroupComm` is one communicator of a group (tp, cp, dp, pp,
// embd, mp, world) used by one stream; it runs the IR's collectives and transfers on buffers
// of the backend's memory. Blocking calls wait through a `WaitPolicy`, which the runtime
// implements: it raises the watchdog and abandons the wait when another stream failed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/dtype.hpp"
#include "exec/clock_sync.hpp"
#include "ir/step_graph.hpp"

namespace paralab::exec {

class CoreTurns;

// How long the MPI transport's wait busy-polls a pending call before it sleeps between tests
// (exec/mpi/mpi_transport.cpp says why 0.5 ms); `paralab calibrate` writes it into a CPU
// topology as collectives.poll_spin_us, the time a waiting thread keeps a core busy.
inline constexpr double kPollSpinUs = 500.0;

// How a blocking communication waits. `check` is called repeatedly while the operation is
// pending, with the seconds waited so far; it throws (WatchdogError, Cancelled) to give up.
class WaitPolicy {
 public:
  virtual ~WaitPolicy() = default;
  virtual void check(double waited_s) const = 0;
  // With core turns (exec/core_turns.hpp): gives the caller's turn to the next thread of the
  // node that waits for one, queues again, and returns true once it holds a turn again; the
  // caller goes on polling. Without core turns: false, and the caller polls as it would.
  virtual bool yield_turn() const { return false; }
};

// Never gives up (setup code that runs before any stream exists).
class NoWatchdog final : public WaitPolicy {
 public:
  void check(double) const override {}
};

// One communicator: `size()` members, this process at position `index()`. Counts are elements
// of `dtype`. Pointers are the backend's memory (host memory for the CPU backend).
class GroupComm {
 public:
  virtual ~GroupComm() = default;
  [[nodiscard]] virtual int size() const = 0;
  [[nodiscard]] virtual int index() const = 0;
  [[nodiscard]] virtual const std::vector<int64_t>& members() const = 0;  // world ranks in group order
  [[nodiscard]] virtual const std::string& label() const = 0;             // "tp/tp_comm", for messages

  // recv[i] = op over members of send[i]; send == recv is in place.
  virtual void all_reduce(const void* send, void* recv, int64_t count, DType t, ReduceOp op,
                          const WaitPolicy& w) = 0;
  // recv[j*count + i] = send_j[i]; send == recv + index()*count is in place.
  virtual void all_gather(const void* send, void* recv, int64_t count, DType t, const WaitPolicy& w) = 0;
  // recv[i] = op over members of send_j[index()*count + i]. `send` and `recv` must not overlap.
  virtual void reduce_scatter(const void* send, void* recv, int64_t count, DType t, ReduceOp op,
                              const WaitPolicy& w) = 0;
  // recv[j*count + i] = send_j[index()*count + i].
  virtual void all_to_all(const void* send, void* recv, int64_t count, DType t, const WaitPolicy& w) = 0;
  virtual void broadcast(void* buf, int64_t count, DType t, int root, const WaitPolicy& w) = 0;
  // Point to point: send `send_bytes` to group position `to` and/or receive `recv_bytes` from
  // `from` (-1 = none), both with `tag`; the two run concurrently (no ordering deadlock).
  virtual void send_recv(const void* send, int64_t send_bytes, int to, void* recv, int64_t recv_bytes,
                         int from, uint32_t tag, const WaitPolicy& w) = 0;
  // Blocking control all-reduce of int64 values (setup and verification; not timed).
  virtual void control_all_reduce(int64_t* values, int n, ReduceOp op) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int size() const = 0;
  [[nodiscard]] virtual std::string name() const = 0;  // "mpi" | "self"
  // Processes of this job on this host (for memory checks).
  [[nodiscard]] virtual int local_size() const = 0;
  // The host's core turns when this job's ranks outnumber its cores (exec/core_turns.hpp);
  // null otherwise, and the threads are left to the kernel's scheduler.
  [[nodiscard]] virtual CoreTurns* core_turns() { return nullptr; }
  // Whether the ranks of this host wake each other's sleeping communication pollers
  // (exec/doorbells.hpp).
  [[nodiscard]] virtual bool doorbells() const { return false; }
  // The cores this job's ranks on this host may run on together: the union of their CPU
  // affinities (exec/core_turns.hpp). Not one rank's: mpirun binds each of 2 ranks on a 2-core
  // host to a core of its own, and the host still has 2 cores for them.
  [[nodiscard]] virtual int node_cores() const = 0;
  virtual void barrier() = 0;
  // Collective over the world, called by every rank in the same order: ranks with the same
  // color >= 0 form a communicator ordered by key; color < 0 returns null. `members` are the
  // world ranks of the caller's group in key order (for messages).
  virtual std::unique_ptr<GroupComm> split(int color, int key, std::vector<int64_t> members,
                                           std::string label) = 0;
  // Collective: values[i] = op over ranks (int64).
  virtual void all_reduce(int64_t* values, int n, ReduceOp op) = 0;
  // Collective: this rank's clock `now_us` minus rank 0's at the same instant (µs), so that a
  // time t read here is t - offset on rank 0's clock. Each rank's step clock starts when it
  // leaves a barrier, but on a loaded host a rank may be descheduled for milliseconds between
  // the barrier and reading its clock, so op times of different ranks are only comparable
  // after this correction (exec/clock_sync.hpp; docs/executor.md, "One clock for all ranks").
  virtual ClockOffset clock_offset(const std::function<double()>& now_us) = 0;
  // Collective: rank 0 receives every rank's blob (index = rank); others get an empty vector.
  virtual std::vector<std::string> gather_to_root(const std::string& blob) = 0;
  // Ends every other rank of the job now with `code` (after the caller printed why); MPI_Abort
  // does not return. In a one-rank world there is nobody else: it returns and the caller exits.
  virtual void abort(int code) = 0;
  // Orderly end (MPI_Finalize); called once by the owner before exit.
  virtual void finalize() = 0;
};

// One process, no MPI: groups of size 1 (their collectives are local copies).
std::unique_ptr<Transport> make_self_transport();

// A group of one member (what `split` returns in a one-rank world).
std::unique_ptr<GroupComm> make_self_comm(int64_t world_rank, std::string label);

}  // namespace paralab::exec
