// tests/exec — the CPU backend's typed accumulation loops against the per-element reference
// (load both in fp32, add, store in the dtype) on random data: the ZeRO gradient shard's
// accumulate_into and add_into's bf16 loop must give the generic path's bits exactly (a result
// must not depend on which loop computed it).
#include <catch2/catch.hpp>

#include <cstring>

#include "exec_test_util.hpp"

using namespace paralab;
using namespace paralab::exec;
using namespace paralab::exec::test;

namespace {

const char* name_of(DType t) { return t == DType::f32 ? "f32" : t == DType::bf16 ? "bf16" : "f16"; }

}  // namespace

TEST_CASE("accumulate_into: dst += src in the dtype, as the per-element reference", "[exec][cpu_math]") {
  const int64_t n = 1037;  // not a multiple of any vector width: the loops' tails too
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    CAPTURE(name_of(t));
    auto dst = storage(random_floats(static_cast<size_t>(n), 11, 3.0f), t);
    const auto src = storage(random_floats(static_cast<size_t>(n), 12, 3.0f), t);
    auto want = dst;
    for (int64_t i = 0; i < n; ++i) cpu::store(want.data(), t, i, cpu::load(want.data(), t, i) + cpu::load(src.data(), t, i));
    cpu::accumulate_into(dst.data(), src.data(), t, n);
    REQUIRE(std::memcmp(dst.data(), want.data(), dst.size()) == 0);
    // Not a no-op: the sums moved the values.
    REQUIRE(std::memcmp(dst.data(), storage(random_floats(static_cast<size_t>(n), 11, 3.0f), t).data(), dst.size()) != 0);
  }
}

TEST_CASE("add_into: fp32 sums stored or accumulated in the dtype, as the per-element reference", "[exec][cpu_math]") {
  const int64_t n = 1037;
  const auto src = random_floats(static_cast<size_t>(n), 13, 2.0f);
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (bool acc : {false, true}) {
      CAPTURE(name_of(t), acc);
      auto dst = storage(random_floats(static_cast<size_t>(n), 14, 2.0f), t);
      auto want = dst;
      for (int64_t i = 0; i < n; ++i) cpu::store(want.data(), t, i, (acc ? cpu::load(want.data(), t, i) : 0.0f) + src[static_cast<size_t>(i)]);
      cpu::add_into(dst.data(), t, n, src.data(), acc);
      REQUIRE(std::memcmp(dst.data(), want.data(), dst.size()) == 0);
    }
}
