// tests/exec — the MPI transport on 4 ranks: communicators split per group, exact collectives
// in fp32/bf16/f16 (including in-place forms and the reduce-scatter shard), tagged transfers
// from concurrent threads, concurrent collectives on per-stream communicators, gathering to
// rank 0, and the executor's own collective self-check on every communicator of a layout.
#include <catch2/catch.hpp>

#include <chrono>
#include <algorithm>
#include <cmath>
#include <thread>

#include "exec/backends.hpp"
#include "exec/doorbells.hpp"
#include "exec/fill.hpp"
#include "exec/plan.hpp"
#include "exec/verify.hpp"
#include "exec_test_util.hpp"
#include "kernels/dtype.hpp"
#include "mpi_test_world.hpp"

using namespace paralab;
using namespace paralab::exec;
using namespace paralab::exec::test;

namespace {

Transport& world() { return *g_world; }

std::unique_ptr<GroupComm> split_pairs(const std::string& label) {  // {0,1} and {2,3}
  const int r = world().rank();
  return world().split(r / 2, r % 2, {r / 2 * 2, r / 2 * 2 + 1}, label);
}

}  // namespace

TEST_CASE("the test needs 4 ranks", "[mpi]") { REQUIRE(world().size() == 4); }

TEST_CASE("split: groups, positions and members; ranks outside a group get none", "[mpi]") {
  const int r = world().rank();
  auto pairs = split_pairs("pairs");
  REQUIRE(pairs);
  CHECK(pairs->size() == 2);
  CHECK(pairs->index() == r % 2);
  // Only ranks 0 and 3 (an "embedding group").
  auto ends = world().split(r == 0 || r == 3 ? 0 : -1, r == 0 ? 0 : 1, r == 0 || r == 3 ? std::vector<int64_t>{0, 3} : std::vector<int64_t>{}, "ends");
  CHECK((ends != nullptr) == (r == 0 || r == 3));
  if (ends) CHECK(ends->size() == 2);
}

TEST_CASE("16-bit all-reduce: bf16 and f16 sums and maxima are exact on small integers", "[mpi]") {
  const int r = world().rank();
  auto all = world().split(0, r, {0, 1, 2, 3}, "all");
  NoWait w;
  for (DType t : {DType::bf16, DType::f16}) {
    std::vector<float> v(100);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((r + 1) * static_cast<int>(i % 7) - 3);
    auto s = storage(v, t), m = storage(v, t);
    all->all_reduce(s.data(), s.data(), 100, t, ReduceOp::sum, w);
    all->all_reduce(m.data(), m.data(), 100, t, ReduceOp::max, w);
    const auto sv = values(s, t), mv = values(m, t);
    for (size_t i = 0; i < v.size(); ++i) {
      float sum = 0, mx = -1e30f;
      for (int q = 0; q < 4; ++q) {
        const float x = static_cast<float>((q + 1) * static_cast<int>(i % 7) - 3);
        sum += x;
        mx = std::max(mx, x);
      }
      CHECK(sv[i] == sum);
      CHECK(mv[i] == mx);
    }
  }
}

TEST_CASE("all-gather in place, reduce-scatter into a shard or in place, all-to-all, broadcast", "[mpi]") {
  const int r = world().rank();
  auto all = world().split(0, r, {0, 1, 2, 3}, "all");
  NoWait w;
  const int64_t k = 5;
  std::vector<float> buf(4 * k, -1.0f);
  for (int64_t i = 0; i < k; ++i) buf[static_cast<size_t>(r * k + i)] = static_cast<float>(10 * r + i);
  all->all_gather(buf.data() + r * k, buf.data(), k, DType::f32, w);
  for (int64_t i = 0; i < 4 * k; ++i) CHECK(buf[static_cast<size_t>(i)] == static_cast<float>(10 * (i / k) + i % k));
  std::vector<float> in(4 * k), out(k);
  for (int64_t i = 0; i < 4 * k; ++i) in[static_cast<size_t>(i)] = static_cast<float>(r + i);
  all->reduce_scatter(in.data(), out.data(), k, DType::f32, ReduceOp::sum, w);
  for (int64_t i = 0; i < k; ++i) CHECK(out[static_cast<size_t>(i)] == static_cast<float>(6 + 4 * (r * k + i)));
  // Into this rank's block of the input itself (the ring cannot receive its last step there),
  // twice, the second call smaller than the first (the scratch is kept, not shrunk).
  for (const int64_t kk : {k, int64_t{3}}) {
    std::vector<float> own(static_cast<size_t>(4 * kk));
    for (int64_t i = 0; i < 4 * kk; ++i) own[static_cast<size_t>(i)] = static_cast<float>(r + i);
    all->reduce_scatter(own.data(), own.data() + r * kk, kk, DType::f32, ReduceOp::sum, w);
    for (int64_t i = 0; i < kk; ++i) CHECK(own[static_cast<size_t>(r * kk + i)] == static_cast<float>(6 + 4 * (r * kk + i)));
  }
  std::vector<float> a2a(4 * k);
  all->all_to_all(in.data(), a2a.data(), k, DType::f32, w);
  for (int64_t j = 0; j < 4; ++j)
    for (int64_t i = 0; i < k; ++i) CHECK(a2a[static_cast<size_t>(j * k + i)] == static_cast<float>(j + r * k + i));
  std::vector<float> b(k, static_cast<float>(r));
  all->broadcast(b.data(), k, DType::f32, 2, w);
  for (float x : b) CHECK(x == 2.0f);
}

// The ring all-gather and reduce-scatter (exec/mpi/mpi_transport.cpp) against a reference on
// random data: groups of 2 and 4, an odd block of 4,099 elements (and 100,003 in fp32: transfers
// beyond the shared-memory eager size), fp32 with a tolerance (the ring adds in its own order),
// bf16 and f16 on quarter-integers (every partial sum is exact), sums and maxima.
TEST_CASE("ring all-gather and reduce-scatter match a reference on random data", "[mpi]") {
  const int r = world().rank();
  auto all = world().split(0, r, {0, 1, 2, 3}, "all");
  auto pairs = split_pairs("pairs");
  NoWait w;
  // Member q's input element i of a call with `seed`: uniform in [-2, 2], quarter-integers
  // for the 16-bit types.
  auto input = [](uint64_t seed, int q, int64_t i, bool quarter) {
    const float u = unit_uniform(seed * 131 + static_cast<uint64_t>(q), i);
    return quarter ? std::round(u * 16.0f) / 4.0f - 2.0f : 4.0f * u - 2.0f;
  };
  uint64_t seed = 1;
  for (GroupComm* c : {all.get(), pairs.get()}) {
    const int n = c->size(), me = c->index();
    for (DType t : {DType::f32, DType::bf16, DType::f16}) {
      const bool quarter = t != DType::f32;
      const double tol = quarter ? 0.0 : 1e-5;
      for (int64_t k : t == DType::f32 ? std::vector<int64_t>{4099, 100003} : std::vector<int64_t>{4099}) {
        // All-gather, out of place and in place.
        ++seed;
        std::vector<float> mine(static_cast<size_t>(k));
        for (int64_t i = 0; i < k; ++i) mine[static_cast<size_t>(i)] = input(seed, me, i, quarter);
        auto src = storage(mine, t);
        std::vector<float> zeros(static_cast<size_t>(n * k), -7.0f);
        auto dst = storage(zeros, t);
        c->all_gather(src.data(), dst.data(), k, t, w);
        auto got = values(dst, t);
        auto in_place = storage(zeros, t);
        std::copy(src.begin(), src.end(), in_place.begin() + static_cast<std::ptrdiff_t>(me * k * bytes_of(t)));
        c->all_gather(in_place.data() + me * k * bytes_of(t), in_place.data(), k, t, w);
        auto got2 = values(in_place, t);
        int64_t bad = 0;
        for (int64_t i = 0; i < n * k; ++i) {
          const float want = input(seed, static_cast<int>(i / k), i % k, quarter);  // exact in every type
          bad += got[static_cast<size_t>(i)] != want || got2[static_cast<size_t>(i)] != want;
        }
        CHECK(bad == 0);
        // Reduce-scatter: member q's share of block `me`, summed (or maxed) over the members.
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
          ++seed;
          std::vector<float> full(static_cast<size_t>(n * k));
          for (int64_t i = 0; i < n * k; ++i) full[static_cast<size_t>(i)] = input(seed, me, i, quarter);
          auto a = storage(full, t);
          auto b = storage(std::vector<float>(static_cast<size_t>(k), -7.0f), t);
          c->reduce_scatter(a.data(), b.data(), k, t, op, w);
          const auto out = values(b, t);
          int64_t off = 0;
          for (int64_t i = 0; i < k; ++i) {
            double want = op == ReduceOp::sum ? 0.0 : -1e30;
            for (int q = 0; q < n; ++q) {
              const double x = input(seed, q, me * k + i, quarter);
              want = op == ReduceOp::sum ? want + x : std::max(want, x);
            }
            off += std::abs(out[static_cast<size_t>(i)] - want) > tol * (1.0 + std::abs(want));
          }
          CHECK(off == 0);
        }
      }
    }
  }
}

TEST_CASE("tagged transfers from two threads on one communicator do not mix", "[mpi]") {
  const int r = world().rank();
  auto ring = world().split(0, r, {0, 1, 2, 3}, "ring");
  NoWait w;
  const int next = (r + 1) % 4, prev = (r + 3) % 4;
  // Like pipeline send and receive streams: two threads, forward (+1) and backward (-1), each
  // sending and receiving, with different tags and several messages each.
  std::vector<std::vector<float>> got_fwd(8, std::vector<float>(64)), got_bwd(8, std::vector<float>(64));
  auto run = [&](bool forward) {
    for (uint32_t mb = 0; mb < 8; ++mb) {
      std::vector<float> msg(64, static_cast<float>(1000 * r + 10 * mb + (forward ? 1 : 2)));
      const uint32_t tag = 16 + 2 * mb + (forward ? 0 : 1);
      auto& dst = forward ? got_fwd[mb] : got_bwd[mb];
      ring->send_recv(msg.data(), 256, forward ? next : prev, dst.data(), 256, forward ? prev : next, tag, w);
    }
  };
  std::thread a(run, true), b(run, false);
  a.join();
  b.join();
  for (uint32_t mb = 0; mb < 8; ++mb) {
    CHECK(got_fwd[mb][0] == static_cast<float>(1000 * prev + 10 * mb + 1));
    CHECK(got_bwd[mb][63] == static_cast<float>(1000 * next + 10 * mb + 2));
  }
}

TEST_CASE("collectives on per-stream communicators run concurrently from their threads", "[mpi]") {
  const int r = world().rank();
  auto c1 = split_pairs("pairs/compute"), c2 = split_pairs("pairs/dp_comm");
  NoWait w;
  float s1 = 0, s2 = 0;
  auto loop = [&](GroupComm& c, float base, float& out) {
    for (int i = 0; i < 50; ++i) {
      float x = base + static_cast<float>(r), y = 0;
      c.all_reduce(&x, &y, 1, DType::f32, ReduceOp::sum, w);
      out += y;
    }
  };
  std::thread a(loop, std::ref(*c1), 1.0f, std::ref(s1)), b(loop, std::ref(*c2), 100.0f, std::ref(s2));
  a.join();
  b.join();
  const float pair = static_cast<float>(r / 2 * 2 * 2 + 1);  // r0 + r1 of the pair
  CHECK(s1 == 50 * (2 * 1.0f + pair));
  CHECK(s2 == 50 * (2 * 100.0f + pair));
}

TEST_CASE("gather_to_root collects every rank's blob in rank order", "[mpi]") {
  const int r = world().rank();
  const auto all = world().gather_to_root(std::string(static_cast<size_t>(r + 1), static_cast<char>('a' + r)));
  if (r == 0) {
    REQUIRE(all.size() == 4);
    for (int q = 0; q < 4; ++q) CHECK(all[static_cast<size_t>(q)] == std::string(static_cast<size_t>(q + 1), static_cast<char>('a' + q)));
  } else {
    CHECK(all.empty());
  }
}

TEST_CASE("the executor's self-check passes on every communicator of TP2 x DP2 and of PP4", "[mpi]") {
  for (const char* name : {"cpu-tp2-dp2-zero3", "cpu-pp4"}) {
    const StepIR ir = build_step_ir(scenario(name));
    const RankPlan plan = plan_rank(ir, world().rank(), false);
    auto backend = make_backend("cpu", ir, plan.rank);
    backend->setup(plan, world());
    const auto comms = backend->comms();
    check_collective_sequences(plan, comms);
    VerifyReport rep;
    check_collectives(*backend, plan, comms, 30, rep);
    CAPTURE(name);
    for (const auto& f : rep.failures) UNSCOPED_INFO(f);
    CHECK(rep.failed() == 0);
    CHECK(rep.total() > 10);  // every communicator of the rank, every kind
  }
}

TEST_CASE("clock offsets: ranks whose clocks differ by known amounts are put on rank 0's clock", "[mpi]") {
  // Every rank reads the host's one steady clock, shifted by a planted offset; the estimate
  // must find the planted offset against rank 0 within the bound it reports.
  const int r = world().rank();
  const double planted_us = 1000.0 * r + (r % 2 ? -123.25 : 57.5);
  const double rank0_us = 57.5;
  const auto now = [&] {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count() +
           planted_us;
  };
  const ClockOffset o = world().clock_offset(now);
  CAPTURE(r, o.offset_us, o.error_us);
  CHECK(o.error_us >= 0);
  CHECK(std::abs(o.offset_us - (planted_us - rank0_us)) <= o.error_us + 1.0);
  if (r == 0) CHECK(o.offset_us == 0);
}

// Doorbells (exec/doorbells.hpp): every call of a pair whose second member arrives long after
// the first went to sleep (past the 0.5 ms spin window) completes with the right data, the
// early member woken by the late one's ring; both roles, collectives and transfers. ctest runs
// this also without core turns (exec_mpi_doorbells), where pollers do sleep, and with
// PARALAB_DOORBELLS=off, where they sleep on a timer alone.
TEST_CASE("a member arriving long after its peer fell asleep completes every kind of call", "[mpi][doorbells]") {
  const int r = world().rank();
  CHECK(world().doorbells() == DoorbellMode::from_environment().on);
  auto pair = split_pairs("pairs/late");
  NoWait w;
  for (int round = 0; round < 6; ++round) {
    const bool late = (r % 2) == (round % 2);  // each member is the late one every other round
    auto arrive = [&] {
      if (late) std::this_thread::sleep_for(std::chrono::milliseconds(3));
    };
    std::vector<float> mine(1024), all(2048), sum(1024), shard(1024), got(1024);
    for (int i = 0; i < 1024; ++i) mine[static_cast<size_t>(i)] = static_cast<float>(r * 10000 + round * 100 + i % 97);
    arrive();
    pair->all_gather(mine.data(), all.data(), 1024, DType::f32, w);
    arrive();
    pair->all_reduce(mine.data(), sum.data(), 1024, DType::f32, ReduceOp::sum, w);
    arrive();
    pair->reduce_scatter(all.data(), shard.data(), 1024, DType::f32, ReduceOp::sum, w);
    arrive();
    const int other = 1 - pair->index();
    pair->send_recv(mine.data(), 4096, other, got.data(), 4096, other, 7 + static_cast<uint32_t>(round), w);
    const int peer = r ^ 1, lo = r / 2 * 2;
    int off = 0;
    for (int i = 0; i < 1024; ++i) {
      const auto v = [&](int rank, int j) { return static_cast<float>(rank * 10000 + round * 100 + j % 97); };
      off += all[static_cast<size_t>(i)] != v(lo, i) || all[1024 + static_cast<size_t>(i)] != v(lo + 1, i);
      off += sum[static_cast<size_t>(i)] != v(r, i) + v(peer, i);
      // shard = this member's block of (all + all) summed over the pair: twice its rank's values.
      off += shard[static_cast<size_t>(i)] != 2 * v(lo + pair->index(), i);
      off += got[static_cast<size_t>(i)] != v(peer, i);
    }
    CHECK(off == 0);
  }
}
