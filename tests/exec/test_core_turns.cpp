// tests/exec — core turns (exec/core_turns.hpp): at most `cores` holders, first come first
// served, waits bounded by the wait policy. Threads of one process stand for the node's ranks
// (the futexes are the shared kind, which work within a process too).
#include <catch2/catch.hpp>

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "exec/comm.hpp"
#include "exec/core_turns.hpp"
#include "ir/error.hpp"

using namespace paralab::exec;

namespace {
struct Shared {
  alignas(64) unsigned char bytes[CoreTurns::kSharedBytes] = {};
};
// Gives up after `limit_s` of waiting, as the runtime's watchdog does.
class Deadline final : public WaitPolicy {
 public:
  explicit Deadline(double limit_s) : limit_s_(limit_s) {}
  void check(double waited_s) const override {
    if (waited_s > limit_s_) throw std::runtime_error("waited too long for a turn");
  }

 private:
  double limit_s_;
};
void wait_until(const std::function<bool()>& cond) {
  for (int i = 0; i < 20000 && !cond(); ++i) std::this_thread::sleep_for(std::chrono::microseconds(100));
  REQUIRE(cond());
}
}  // namespace

TEST_CASE("core turns: never more holders than cores, and every thread gets its turns") {
  for (int cores : {1, 2, 3}) {
    Shared mem;
    CoreTurns turns(mem.bytes, cores);
    const Deadline w(60);
    std::atomic<int> holders{0}, most{0};
    std::atomic<int64_t> done{0};
    constexpr int kThreads = 7, kRounds = 3000;
    std::vector<std::thread> ts;
    for (int i = 0; i < kThreads; ++i)
      ts.emplace_back([&, i] {
        volatile double x = i;
        for (int r = 0; r < kRounds; ++r) {
          turns.acquire(w);
          const int h = holders.fetch_add(1) + 1;
          for (int m = most.load(); h > m && !most.compare_exchange_weak(m, h);) {}
          for (int k = 0; k < (r % 7) * 50; ++k) x = x * 1.0000001 + 1;  // uneven hold times
          holders.fetch_sub(1);
          turns.release();
          done.fetch_add(1);
        }
      });
    for (auto& t : ts) t.join();
    CAPTURE(cores);
    CHECK(done.load() == int64_t{kThreads} * kRounds);
    CHECK(most.load() <= cores);
    CHECK(most.load() >= 1);
    CHECK(turns.waiting() == 0);
  }
}

TEST_CASE("core turns: waiters are admitted in the order they asked") {
  Shared mem;
  CoreTurns turns(mem.bytes, 1);
  const Deadline w(60);
  turns.acquire(w);  // held by this thread while the others queue
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread> ts;
  for (int i = 0; i < 5; ++i) {
    ts.emplace_back([&, i] {
      turns.acquire(w);
      {
        std::lock_guard lk(mu);
        order.push_back(i);
      }
      turns.release();
    });
    wait_until([&] { return turns.waiting() == i + 1; });  // thread i has its ticket
  }
  turns.release();
  for (auto& t : ts) t.join();
  CHECK(order == std::vector<int>{0, 1, 2, 3, 4});
  CHECK(turns.waiting() == 0);
}

TEST_CASE("core turns: a wait for a turn that never comes ends through the wait policy") {
  Shared mem;
  CoreTurns turns(mem.bytes, 2);
  const Deadline w(60), short_wait(0.2);
  turns.acquire(w);
  turns.acquire(w);
  CHECK(turns.waiting() == 0);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(turns.acquire(short_wait), "waited too long for a turn");
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(200));
}

TEST_CASE("core turns: bad arguments are refused") {
  Shared mem;
  CHECK_THROWS_AS(CoreTurns(nullptr, 2), std::invalid_argument);
  CHECK_THROWS_AS(CoreTurns(mem.bytes, 0), std::invalid_argument);
}

TEST_CASE("core turns: the mode PARALAB_CORE_TURNS names, and the turns it gives a host") {
  using Kind = CoreTurnsMode::Kind;
  // Unset, empty and "auto": turns only when the host's ranks outnumber its cores.
  for (const char* v : {static_cast<const char*>(nullptr), "", "auto"}) {
    const CoreTurnsMode m = CoreTurnsMode::parse(v);
    CHECK(m.kind == Kind::automatic);
    CHECK(m.turns_for(4, 2) == 2);
    CHECK(m.turns_for(2, 2) == 0);
    CHECK(m.turns_for(1, 8) == 0);
  }
  CHECK(CoreTurnsMode::parse("on").turns_for(2, 2) == 2);
  CHECK(CoreTurnsMode::parse("off").turns_for(4, 2) == 0);
  const CoreTurnsMode three = CoreTurnsMode::parse("3");
  CHECK(three.kind == Kind::fixed);
  CHECK(three.turns_for(2, 16) == 3);
  CHECK(CoreTurnsMode::parse("4096").turns_for(1, 1) == 4096);
  // Anything else names the variable, the value and what is allowed.
  for (const char* bad : {"sometimes", "0", "4097", "-2", "2x", "On"}) {
    INFO(bad);
    try {
      (void)CoreTurnsMode::parse(bad);
      FAIL("accepted");
    } catch (const paralab::ConfigError& e) {
      CHECK(e.key() == "PARALAB_CORE_TURNS");
      CHECK(e.value() == bad);
      CHECK(std::string(e.what()).find("auto, on, off or a number of turns 1-4096") != std::string::npos);
    }
  }
}

TEST_CASE("core turns: a process's cores are its affinity mask, counted bit by bit") {
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  const CpuMask m = affinity_mask();
  for (int i = 0; i < static_cast<int>(m.size() * 64); ++i)
    CHECK(((m[static_cast<size_t>(i / 64)] >> (i % 64)) & 1) == (CPU_ISSET(i, &set) ? 1u : 0u));
  CHECK(count_cpus(m) == CPU_COUNT(&set));
  CHECK(usable_cores() == CPU_COUNT(&set));
  // A union of two ranks' masks, each bound to a core of its own (as mpirun binds 2 ranks on a
  // 2-core host), counts both; bits at the words' edges count once each.
  CpuMask a{}, b{};
  a[0] = 1;                     // CPU 0
  b[0] = 2;                     // CPU 1
  CHECK(count_cpus(a) == 1);
  CpuMask u{};
  for (size_t w = 0; w < u.size(); ++w) u[w] = a[w] | b[w];
  CHECK(count_cpus(u) == 2);
  CpuMask edges{};
  edges[0] = uint64_t{1} << 63;  // CPU 63
  edges[1] = 1;                  // CPU 64
  edges[15] = uint64_t{1} << 63; // CPU 1023
  CHECK(count_cpus(edges) == 3);
  CHECK(count_cpus(CpuMask{}) == 0);
}

TEST_CASE("core turns: a thread that takes them runs under SCHED_BATCH, and only that thread") {
  auto policy_of_this_thread = [] {
    int policy = -1;
    sched_param p{};
    REQUIRE(pthread_getschedparam(pthread_self(), &policy, &p) == 0);
    return policy;
  };
  const int before = policy_of_this_thread();
  REQUIRE(before != SCHED_BATCH);
  int there = -1;
  bool took = false;
  std::thread t([&] {
    took = use_batch_scheduling();
    there = policy_of_this_thread();
  });
  t.join();
  REQUIRE(took);
  CHECK(there == SCHED_BATCH);
  CHECK(policy_of_this_thread() == before);  // the thread that started it keeps its own
}
