// paralab exec — a node's cores as turns its ranks' threads take, first come, first served.
//
// With more ranks on a host than it has cores, the kernel's fair scheduler time-slices every
// thread of every rank, and an op's time depends on which other threads happen to be runnable
// (on the 2-core build machine a 2-rank TP all-reduce of cpu-tp2-pp2-gpipe took 15-40 us while
// the other pipeline stage was idle and 130-300 us while it computed). CoreTurns makes the
// ranks take turns instead: a thread holds a turn while its op runs (its timing begins once it
// has one), at most `cores` turns are held on the node at once, the others sleep in arrival
// order, and a polling communication call hands its turn on whenever someone waits. This is
// the discipline the simulator's core pool models (sim/engine/core_pool.hpp). What it bought
// and cost: docs/executor.md, "Core turns".
//
// The state is a counting ticket lock in memory shared by the node's processes (the transport
// provides it: an MPI shared window). Waiters sleep on a futex per ticket slot, so a release
// wakes only the ticket it admits. The threads that take turns run under SCHED_BATCH
// (use_batch_scheduling below), so that the kernel does not hand a turn holder's core to a thread
// it has just woken.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace paralab::exec {

class WaitPolicy;

// The CPUs a process may run on, a bit each (CPU i: bit i % 64 of word i / 64; 1,024 CPUs).
using CpuMask = std::array<uint64_t, 16>;

// This process's (sched_getaffinity; the online CPUs if that fails).
[[nodiscard]] CpuMask affinity_mask();
[[nodiscard]] int count_cpus(const CpuMask& m);
// The cores this process may run on. Not a host's cores for a job of several ranks: mpirun
// binds each of N <= cores ranks to a core of its own, so each sees one; the union of the
// ranks' masks is what they share (Transport::node_cores).
[[nodiscard]] int usable_cores();

// Puts the calling thread under Linux's SCHED_BATCH policy (any user may; priority 0). The fair
// scheduler lets a thread it wakes preempt the one running on the core it lands on; a batch
// thread does not, its preemption is left to the tick (sched(7); Linux's kernel/sched/fair.c,
// check_preempt_wakeup_fair: "BATCH and IDLE tasks do not preempt others", since 6.10; before,
// "Batch and idle tasks do not preempt non-idle tasks"). Under core turns the threads woken are
// those without a turn: a dependency waiter, the ticket a release just admitted, a releaser on
// its way to sleep. Left to preempt, they took a turn holder's core now and then: cpu-pp4's
// compute ops summed 18.0-21.0 ms of wall time per rank and step, 15.3-19.0 ms under
// SCHED_BATCH (docs/executor.md, "Core turns"). False, the policy unchanged, when the system
// refuses.
[[nodiscard]] bool use_batch_scheduling();

// Whether a host's ranks take core turns: `automatic` when they outnumber its cores (the
// default), `on` always (as many turns as cores), `off` never (the kernel's scheduler alone),
// `fixed` a given number of turns (tests: contention on a host of any size). The command line
// reads it once, from PARALAB_CORE_TURNS (auto | on | off | 1-4096), and hands it to the
// transport (make_mpi_transport).
struct CoreTurnsMode {
  enum class Kind : uint8_t { automatic, on, off, fixed };
  Kind kind = Kind::automatic;
  int turns = 0;  // fixed: 1-4096

  // `value` as PARALAB_CORE_TURNS gives it (null or empty: automatic). Throws ConfigError
  // naming the variable, the value and what is allowed.
  static CoreTurnsMode parse(const char* value);
  // parse(PARALAB_CORE_TURNS): for a command line's edge, once (the only place that names it).
  static CoreTurnsMode from_environment();
  // Turns for a host whose ranks number `local_ranks` and may use `cores` cores (0: none).
  [[nodiscard]] int turns_for(int local_ranks, int cores) const;
};

class CoreTurns {
 public:
  // Bytes of shared memory the state needs; the transport zeroes them before any use.
  static constexpr size_t kSharedBytes = 4096;

  // `shared`: kSharedBytes of zeroed memory mapped by every process of the node; `cores` >= 1.
  CoreTurns(void* shared, int cores);

  [[nodiscard]] int cores() const { return cores_; }
  // Blocks until this thread holds a turn (FIFO over the node). `w` is checked at every wake-up,
  // at least every 50 ms (watchdog, another stream's failure); when it throws, the ticket is
  // abandoned, which is only sound because the job is then failing.
  void acquire(const WaitPolicy& w);
  void release();
  // How many threads of the node wait for a turn now (a hint: it may change at once).
  [[nodiscard]] int waiting() const;

 private:
  static constexpr uint32_t kSlots = 512;
  struct State {
    std::atomic<uint32_t> next;      // the next ticket handed out
    std::atomic<uint32_t> released;  // turns given back so far
    std::atomic<uint32_t> slot[kSlots];  // per ticket slot: a generation a waiter sleeps on
  };
  static_assert(sizeof(State) <= kSharedBytes);
  static_assert(std::atomic<uint32_t>::is_always_lock_free, "futexes need plain 32-bit words");

  State* s_;
  int cores_;
};

}  // namespace paralab::exec
