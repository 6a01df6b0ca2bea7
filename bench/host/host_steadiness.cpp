// paralab bench — how steady this host's cores are: one thread pinned to each CPU the process
// may use, all at once, each alternating two fixed workloads over an L1-resident array (no
// memory traffic) window by window, and counting passes per window:
//   - latency: one chain of dependent multiply-adds. Its rate follows the core's clock alone;
//     a hyperthread sibling busy on the same physical core barely slows it.
//   - throughput: independent multiply-adds the compiler vectorizes, as a GEMM or an
//     elementwise kernel fills the core's execution ports. A sibling hyperthread of another
//     tenant competes for those ports.
// A dedicated core gives the same rates in every window (within a few %). When the throughput
// rate moves and the latency rate does not, the core's ports are shared (another tenant's
// thread on its sibling).
//
//   paralab_host_steadiness [--seconds S] [--window-ms W]     (defaults 10 s, 250 ms)
//
// Prints per CPU and workload: windows, rate min / p10 / median / p90 / max (passes per ms),
// and the spread (max - min) / median and p90 / p10 - 1, in percent; then each workload over
// all CPUs. Exit code 2 on bad arguments.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_clock.hpp"
#include "bench/host/host_cli.hpp"

namespace {

namespace host = paralab::bench::host;
using host::quantile;

constexpr int kArray = 1024;  // floats: 4 KiB, in L1

// Latency: a dependent chain over the array (each step needs the last one's result). Not
// inlined: inlined into the timing loop, GCC 12 kept the chain's value in a stack slot (its
// store and reload in the chain made the rate 2.6x lower and dependent on the code around it).
[[gnu::noinline]] float chain_pass(std::vector<float>& a, float x) {
  for (int i = 0; i < kArray; ++i) {
    x = x * 0.999f + a[static_cast<size_t>(i)] * 1e-3f;
    a[static_cast<size_t>(i)] = x;
  }
  return x;
}

// Throughput: every element on its own (vectorized), eight multiply-adds each.
[[gnu::noinline]] void ports_pass(std::vector<float>& a) {
  for (int i = 0; i < kArray; ++i) {
    float v = a[static_cast<size_t>(i)];
    for (int k = 0; k < 8; ++k) v = v * 0.999f + 1e-3f;
    a[static_cast<size_t>(i)] = v;
  }
}

// Keeps `x` (and the work that made it) from being optimized away: a volatile store must happen.
void keep(float x) {
  volatile float sink = x;
  (void)sink;
}

struct Series {
  int cpu = 0;
  std::vector<double> latency, throughput;  // passes per millisecond, one per window
};

void run_pinned(Series& s, double seconds, double window_s, const std::atomic<bool>& go) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(s.cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  std::vector<float> a(kArray);
  for (int i = 0; i < kArray; ++i) a[static_cast<size_t>(i)] = 1e-3f * static_cast<float>(i % 97);
  while (!go.load(std::memory_order_acquire)) {
  }
  const double t0 = paralab::bench::wall_s();
  double last = t0;
  long passes = 0;
  float x = 1.0f;
  bool ports = false;  // the workload of this window; they alternate
  for (;;) {
    if (ports)
      ports_pass(a);
    else
      x = chain_pass(a, x);
    ++passes;
    const double t = paralab::bench::wall_s();
    if (t - last >= window_s) {
      (ports ? s.throughput : s.latency).push_back(static_cast<double>(passes) / ((t - last) * 1e3));
      passes = 0;
      last = t;
      ports = !ports;
      if (t - t0 >= seconds) break;
    }
  }
  keep(x + a[0]);
}

void print(const std::string& label, const std::vector<double>& v) {
  if (v.empty()) return;
  const double mn = quantile(v, 0), p10 = quantile(v, 0.1), med = quantile(v, 0.5), p90 = quantile(v, 0.9),
               mx = quantile(v, 1);
  std::printf("%-18s %4zu windows  rate %.1f / %.1f / %.1f / %.1f / %.1f passes/ms (min/p10/median/p90/max)  "
              "spread %.1f %%  p90/p10 %+.1f %%\n",
              label.c_str(), v.size(), mn, p10, med, p90, mx, 100.0 * (mx - mn) / med, 100.0 * (p90 / p10 - 1.0));
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 10, window_ms = 250;
  if (!host::parse_options(argc, argv, {{"--seconds", &seconds}, {"--window-ms", &window_ms}})) {
    std::fprintf(stderr, "usage: paralab_host_steadiness [--seconds S > 0] [--window-ms W > 0]\n");
    return 2;
  }
  std::vector<Series> series;
  for (const int c : host::allowed_cpus()) series.push_back({c, {}, {}});
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (size_t i = 0; i < series.size(); ++i)
    threads.emplace_back(run_pinned, std::ref(series[i]), seconds, window_ms * 1e-3, std::cref(go));
  go.store(true, std::memory_order_release);
  for (auto& t : threads) t.join();
  std::vector<double> latency, throughput;
  for (const Series& s : series) {
    print("cpu" + std::to_string(s.cpu) + " latency", s.latency);
    print("cpu" + std::to_string(s.cpu) + " throughput", s.throughput);
    latency.insert(latency.end(), s.latency.begin(), s.latency.end());
    throughput.insert(throughput.end(), s.throughput.begin(), s.throughput.end());
  }
  print("all latency", latency);
  print("all throughput", throughput);
  return 0;
}
