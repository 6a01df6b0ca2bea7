// paralab tests — the CPU backend's caching host allocator: aligned blocks, sizes rounded as
// documented, a freed block handed out again for the same rounded size (and not for another),
// safe from several threads.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "exec/cpu/block_cache.hpp"

using paralab::exec::cpu::BlockCache;

TEST_CASE("block cache: rounding, alignment and reuse by rounded size", "[exec][allocator]") {
  CHECK(BlockCache::rounded(0) == 64);
  CHECK(BlockCache::rounded(1) == 64);
  CHECK(BlockCache::rounded(65) == 128);
  CHECK(BlockCache::rounded(64 * 1024 - 1) == 64 * 1024);
  CHECK(BlockCache::rounded(64 * 1024 + 1) == 64 * 1024 + 4096);

  BlockCache c;
  void* a = c.allocate(100'000);
  void* b = c.allocate(1000);
  REQUIRE(a != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(a) % 64 == 0);
  CHECK(reinterpret_cast<uintptr_t>(b) % 64 == 0);
  std::memset(a, 0x5a, 100'000);  // the whole requested size is usable
  c.deallocate(a);
  CHECK(c.cached_bytes() == static_cast<int64_t>(BlockCache::rounded(100'000)));
  void* other = c.allocate(200'000);  // another size class: not the cached block
  CHECK(other != a);
  void* again = c.allocate(100'001);  // same rounded size: the cached block
  CHECK(again == a);
  CHECK(c.reused() == 1);
  CHECK(c.cached_bytes() == 0);
  c.deallocate(again);
  c.deallocate(other);
  c.deallocate(b);
  c.deallocate(nullptr);
}

TEST_CASE("block cache: concurrent streams allocate and free without sharing a block", "[exec][allocator]") {
  BlockCache c;
  std::vector<std::thread> ts;
  std::vector<std::vector<void*>> got(4);
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      for (int round = 0; round < 50; ++round) {
        std::vector<void*> mine;
        for (int i = 1; i <= 8; ++i) {
          void* p = c.allocate(i * 10'000);
          std::memset(p, t, static_cast<size_t>(i) * 10'000);
          mine.push_back(p);
        }
        if (round == 49) got[static_cast<size_t>(t)] = mine;
        else
          for (void* p : mine) c.deallocate(p);
      }
    });
  for (auto& t : ts) t.join();
  std::set<void*> live;
  for (const auto& v : got)
    for (void* p : v) CHECK(live.insert(p).second);  // no block handed to two users at once
  CHECK(c.reused() > 0);
  for (const auto& v : got)
    for (void* p : v) c.deallocate(p);
}
