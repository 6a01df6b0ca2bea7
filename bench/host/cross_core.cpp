// paralab bench — how steady this host's path between two cores is: a writer thread pinned to
// one CPU fills a buffer, a reader pinned to another copies it out (the single copy Open MPI's
// shared-memory transport makes of a peer's freshly written send buffer), turn by turn, and the
// reader's copy rate is taken per window. On a dedicated machine every window gives the same
// rate. On a virtual machine whose vCPUs the hypervisor moves between cores that share a cache
// and cores that do not, the rate has two levels and switches between them: on this project's
// 2-vCPU AMD EPYC guest 512 KiB took about 11 or 24 us, in phases of seconds, and the CPU
// backend's tensor-parallel all-gathers moved with it. host_steadiness.cpp measures each
// core alone; this measures what lies between them.
//
//   paralab_host_cross_core [--seconds S] [--window-ms W] [--kib K]   (defaults 6 s, 250 ms, 512)
//
// The first CPU this process may use writes; each other one (at most 7) reads in turn, for an
// equal share of the seconds. Prints per pair: windows, the copy rate in GB/s (min / p10 /
// median / p90 / max), the spread (max - min) / median, and the two levels: a window is "slow"
// when its rate is below 3/4 of the fastest window's; how many were, their median rate, and how
// many times the pair switched between levels. With one CPU there is no pair: it says so and
// exits 0. Exit code 2 on bad arguments.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_clock.hpp"
#include "bench/host/host_cli.hpp"

namespace {

namespace host = paralab::bench::host;
using host::quantile;

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// One pair's windows: the reader's copy rate in GB/s (1e9 bytes per second), one per window.
struct Pair {
  int writer = 0, reader = 0;
  std::vector<double> gbps;
};

// Turn 0: the writer fills `src` (each round a new byte, so every line is written again and
// sits dirty in the writer's cache); turn 1: the reader copies it to `dst`, timing the copy
// alone. Both spin on the turn: a sleeping thread would time its wake-up, not the path.
void run_pair(Pair& p, double seconds, double window_s, size_t bytes) {
  std::vector<unsigned char> src(bytes), dst(bytes);
  std::atomic<int> turn{0};
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    pin(p.writer);
    unsigned char v = 1;
    for (;;) {
      while (turn.load(std::memory_order_acquire) != 0)
        if (stop.load(std::memory_order_relaxed)) return;
      std::memset(src.data(), v++, bytes);
      turn.store(1, std::memory_order_release);
    }
  });
  pin(p.reader);
  const double t0 = paralab::bench::wall_s();
  double window_start = t0, copying = 0;
  long copies = 0;
  unsigned sum = 0;
  for (;;) {
    while (turn.load(std::memory_order_acquire) != 1) {
    }
    const double a = paralab::bench::wall_s();
    std::memcpy(dst.data(), src.data(), bytes);
    const double b = paralab::bench::wall_s();
    sum += dst[bytes / 2];  // the copy is used
    turn.store(0, std::memory_order_release);
    copying += b - a;
    ++copies;
    if (b - window_start >= window_s) {
      p.gbps.push_back(static_cast<double>(copies) * static_cast<double>(bytes) / copying * 1e-9);
      copies = 0;
      copying = 0;
      window_start = b;
      if (b - t0 >= seconds) break;
    }
  }
  stop.store(true, std::memory_order_relaxed);
  writer.join();
  volatile unsigned sink = sum;
  (void)sink;
}

void print(const Pair& p) {
  const std::vector<double>& v = p.gbps;
  if (v.empty()) return;
  const double mn = quantile(v, 0), p10 = quantile(v, 0.1), med = quantile(v, 0.5), p90 = quantile(v, 0.9),
               mx = quantile(v, 1);
  // Two levels: below 3/4 of the fastest window is the slow one (the guest above: 22 against 46
  // GB/s). The fastest, not a high quantile: a pair slow most of the time still shows its one
  // fast window (a copy is never faster than the path allows, so a fast window is no outlier).
  const double cut = 0.75 * mx;
  std::vector<double> slow;
  int switches = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < cut) slow.push_back(v[i]);
    if (i > 0 && (v[i] < cut) != (v[i - 1] < cut)) ++switches;
  }
  std::printf("cpu%d -> cpu%d  %4zu windows  copy %.1f / %.1f / %.1f / %.1f / %.1f GB/s (min/p10/median/p90/max)  "
              "spread %.1f %%  slow windows %zu",
              p.writer, p.reader, v.size(), mn, p10, med, p90, mx, 100.0 * (mx - mn) / med, slow.size());
  if (!slow.empty()) std::printf(" (median %.1f GB/s, %d switches)", quantile(slow, 0.5), switches);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 6, window_ms = 250, kib = 512;
  if (!host::parse_options(argc, argv, {{"--seconds", &seconds}, {"--window-ms", &window_ms}, {"--kib", &kib}})) {
    std::fprintf(stderr, "usage: paralab_host_cross_core [--seconds S > 0] [--window-ms W > 0] [--kib K > 0]\n");
    return 2;
  }
  const std::vector<int> cpus = host::allowed_cpus();
  if (cpus.size() < 2) {
    std::printf("one CPU: no path between cores to measure\n");
    return 0;
  }
  constexpr size_t kMaxReaders = 7;
  const size_t readers = std::min(kMaxReaders, cpus.size() - 1);
  const auto bytes = static_cast<size_t>(kib * 1024.0);
  for (size_t r = 1; r <= readers; ++r) {
    Pair p{cpus[0], cpus[r], {}};
    run_pair(p, seconds / static_cast<double>(readers), window_ms * 1e-3, std::max<size_t>(bytes, 64));
    print(p);
  }
  return 0;
}
