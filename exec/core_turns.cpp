// paralab exec — core turns: a FIFO counting ticket lock over futexes in node-shared memory, and
// the mode that says when a host takes them.
#include "exec/core_turns.hpp"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <ctime>
#include <stdexcept>
#include <string>

#include "exec/comm.hpp"
#include "exec/futex.hpp"
#include "ir/error.hpp"

namespace paralab::exec {

CpuMask affinity_mask() {
  CpuMask m{};
  cpu_set_t set;
  CPU_ZERO(&set);
  const bool got = sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0;
  const long online = std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN));
  const int bits = static_cast<int>(m.size() * 64);
  for (int i = 0; i < bits; ++i)
    if (got ? CPU_ISSET(i, &set) != 0 : i < online) m[static_cast<size_t>(i / 64)] |= uint64_t{1} << (i % 64);
  return m;
}

int count_cpus(const CpuMask& m) {
  int n = 0;
  for (uint64_t w : m) n += std::popcount(w);
  return n;
}

int usable_cores() { return std::max(1, count_cpus(affinity_mask())); }

bool use_batch_scheduling() {
  const sched_param none{};  // SCHED_BATCH takes priority 0
  // pthread's call, not sched_setscheduler: POSIX makes that one a process's; only Linux
  // applies it to the calling thread.
  return pthread_setschedparam(pthread_self(), SCHED_BATCH, &none) == 0;
}

CoreTurnsMode CoreTurnsMode::parse(const char* value) {
  const std::string v = value ? value : "";
  if (v.empty() || v == "auto") return {};
  if (v == "on") return {Kind::on, 0};
  if (v == "off") return {Kind::off, 0};
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (*end != '\0' || n < 1 || n > 4096)
    throw ConfigError(SourceLoc{"environment", 0, 0}, "PARALAB_CORE_TURNS", v, "not a core-turns mode",
                      "auto, on, off or a number of turns 1-4096");
  return {Kind::fixed, static_cast<int>(n)};
}

CoreTurnsMode CoreTurnsMode::from_environment() { return parse(std::getenv("PARALAB_CORE_TURNS")); }

int CoreTurnsMode::turns_for(int local_ranks, int cores) const {
  switch (kind) {
    case Kind::automatic: return local_ranks > cores ? cores : 0;
    case Kind::on: return cores;
    case Kind::off: return 0;
    case Kind::fixed: return turns;
  }
  return 0;
}

CoreTurns::CoreTurns(void* shared, int cores) : s_(static_cast<State*>(shared)), cores_(cores) {
  if (!shared) throw std::invalid_argument("CoreTurns: no shared memory");
  if (cores < 1) throw std::invalid_argument("CoreTurns: cores must be >= 1");
}

// A ticket lock (Mellor-Crummey & Scott, "Algorithms for scalable synchronization on
// shared-memory multiprocessors", ACM TOCS 9(1), 1991, Sec. 2.2), counting: `cores` holders.
// Ticket t holds a turn once fewer than `cores` earlier tickets still hold theirs:
// t - released < cores. The difference is taken modulo 2^32 and read as signed, so the
// counters may wrap, and it may be negative: a waiter not yet scheduled when its turn came
// finds later tickets admitted and released past it. Tickets are admitted in order, so a
// waiter's slot is woken by exactly the release that admits it.
void CoreTurns::acquire(const WaitPolicy& w) {
  const uint32_t t = s_->next.fetch_add(1);
  std::atomic<uint32_t>& slot = s_->slot[t % kSlots];
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    // The generation first: a release between the check and the sleep changes it, and the
    // futex then returns at once.
    const uint32_t gen = slot.load();
    if (static_cast<int32_t>(t - s_->released.load()) < cores_) return;
    futex_wait(&slot, gen, 50'000'000);
    w.check(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
}

void CoreTurns::release() {
  const uint32_t r = s_->released.fetch_add(1) + 1;
  // The ticket this admits: a = r + cores - 1. The system call only when it was handed out: a
  // waiter takes its ticket before it reads `released` (both sequentially consistent), so if
  // `next` does not show it yet, it will see this release when it checks.
  const uint32_t a = r + static_cast<uint32_t>(cores_) - 1;
  std::atomic<uint32_t>& slot = s_->slot[a % kSlots];
  slot.fetch_add(1);
  if (static_cast<int32_t>(s_->next.load() - a) > 0) futex_wake(&slot);
}

int CoreTurns::waiting() const {
  const auto taken = static_cast<int32_t>(s_->next.load(std::memory_order_relaxed) -
                                          s_->released.load(std::memory_order_relaxed));
  return taken > cores_ ? taken - cores_ : 0;
}

}  // namespace paralab::exec
