// paralab exec — the two futex calls the node-shared primitives use (core turns, doorbells).
//
// Shared (not FUTEX_PRIVATE) futexes: the waiters and the wakers are different processes that
// map the same memory (futex(2)). A wait's result is not read: woken, timed out, interrupted
// or the word already changed, the caller checks its condition again.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <ctime>

namespace paralab::exec {

// Sleeps while *word == expected, at most timeout_ns.
inline void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns) {
  timespec ts{static_cast<time_t>(timeout_ns / 1000000000), static_cast<long>(timeout_ns % 1000000000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

// Wakes every thread asleep on `word`.
inline void futex_wake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace paralab::exec
