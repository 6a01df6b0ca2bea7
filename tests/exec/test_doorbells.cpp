// tests/exec — doorbells (exec/doorbells.hpp): a ring wakes a sleeper and only a ring makes
// sleep() say so; a ring before the sleep is not lost; bells are per host rank and group slot.
// Threads of one process stand for the host's ranks (the futexes are the shared kind, which
// work within a process too). No assertion is on wall time: a sleep that a ring failed to
// end would only make the test slow, so the sleeps that must be rung wait far longer than a
// test may take, and the runner's timeout is what would catch them.
#include <catch2/catch.hpp>

#include <atomic>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "exec/doorbells.hpp"
#include "ir/error.hpp"

using namespace paralab::exec;

namespace {
struct Shared {
  alignas(64) unsigned char bytes[Doorbells::kSharedBytes] = {};
};
constexpr int64_t kForeverUs = 600'000'000;  // 10 minutes: longer than ctest lets a test run
}  // namespace

TEST_CASE("doorbells: a ring wakes the sleeper, and a sleep that times out was not rung") {
  static Shared mem;
  Doorbells bells(mem.bytes, 2);
  Doorbells::Bell& b = bells.bell(1, 3);
  // Nobody rings: the sleep ends by its timeout and says so.
  CHECK_FALSE(Doorbells::sleep(b, Doorbells::heard(b), 1000));
  CHECK(b.sleepers.load() == 0);
  // A sleeper with a timeout far beyond the test's is woken by a ring from another thread.
  for (int round = 0; round < 20; ++round) {
    const uint32_t heard = Doorbells::heard(b);
    std::atomic<bool> rung{false};
    std::thread sleeper([&] { rung = Doorbells::sleep(b, heard, kForeverUs); });
    while (b.sleepers.load() == 0) std::this_thread::yield();  // asleep, or about to be
    Doorbells::ring(b);
    sleeper.join();
    CHECK(rung.load());
    CHECK(b.sleepers.load() == 0);
  }
}

TEST_CASE("doorbells: a ring between reading the count and sleeping is not lost") {
  static Shared mem;
  Doorbells bells(mem.bytes, 4);
  Doorbells::Bell& b = bells.bell(2, 0);
  const uint32_t heard = Doorbells::heard(b);
  Doorbells::ring(b);  // the peer arrives after the test that found nothing done
  CHECK(Doorbells::sleep(b, heard, kForeverUs));  // returns at once, rung
  // Rung several times by several ringers while nobody sleeps: the count moved, no wake lost.
  const uint32_t before = Doorbells::heard(b);
  std::thread a([&] { for (int i = 0; i < 1000; ++i) Doorbells::ring(b); });
  std::thread c([&] { for (int i = 0; i < 1000; ++i) Doorbells::ring(b); });
  a.join();
  c.join();
  CHECK(Doorbells::heard(b) - before == 2000u);
}

TEST_CASE("doorbells: one bell per host rank and group slot, slots wrapping") {
  static Shared mem;
  Doorbells bells(mem.bytes, Doorbells::kMaxLocalRanks);
  std::set<const Doorbells::Bell*> seen;
  for (int r = 0; r < Doorbells::kMaxLocalRanks; ++r)
    for (int s = 0; s < Doorbells::kGroupSlots; ++s) seen.insert(&bells.bell(r, s));
  CHECK(seen.size() == static_cast<size_t>(Doorbells::kMaxLocalRanks * Doorbells::kGroupSlots));
  CHECK(&bells.bell(5, 2) == &bells.bell(5, 2 + Doorbells::kGroupSlots));
  CHECK(&bells.bell(5, 2) == &bells.bell(5, 2 - 3 * Doorbells::kGroupSlots));
  // Ringing one bell leaves its neighbours' counts alone.
  const uint32_t next = Doorbells::heard(bells.bell(5, 3)), other = Doorbells::heard(bells.bell(6, 2));
  Doorbells::ring(bells.bell(5, 2));
  CHECK(Doorbells::heard(bells.bell(5, 3)) == next);
  CHECK(Doorbells::heard(bells.bell(6, 2)) == other);
}

TEST_CASE("doorbells: bad arguments are refused") {
  static Shared mem;
  CHECK_THROWS_AS(Doorbells(nullptr, 2), std::invalid_argument);
  CHECK_THROWS_AS(Doorbells(mem.bytes, 0), std::invalid_argument);
  CHECK_THROWS_AS(Doorbells(mem.bytes, Doorbells::kMaxLocalRanks + 1), std::invalid_argument);
  Doorbells bells(mem.bytes, 3);
  CHECK_THROWS_AS(bells.bell(3, 0), std::out_of_range);
  CHECK_THROWS_AS(bells.bell(-1, 0), std::out_of_range);
}

TEST_CASE("doorbells: the mode PARALAB_DOORBELLS names") {
  CHECK(DoorbellMode::parse(nullptr).on);
  CHECK(DoorbellMode::parse("").on);
  CHECK(DoorbellMode::parse("on").on);
  CHECK_FALSE(DoorbellMode::parse("off").on);
  for (const char* bad : {"yes", "0", "OFF", "on "}) {
    INFO(bad);
    try {
      (void)DoorbellMode::parse(bad);
      FAIL("accepted");
    } catch (const paralab::ConfigError& e) {
      CHECK(e.key() == "PARALAB_DOORBELLS");
      CHECK(e.value() == bad);
      CHECK(std::string(e.what()).find("on or off") != std::string::npos);
    }
  }
}
