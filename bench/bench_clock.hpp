// paralab bench — the clocks and memory gauge every benchmark reports with: CPU seconds of this
// process (all threads), wall seconds, and peak resident memory.
#pragma once

#include <sys/resource.h>
#include <time.h>

#include <chrono>

namespace paralab::bench {

inline double cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

inline double wall_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double peak_rss_gib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / (1024.0 * 1024.0);  // ru_maxrss is KiB on Linux
}

}  // namespace paralab::bench
