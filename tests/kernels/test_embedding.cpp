// tests/kernels/test_embedding.cpp — vocab-parallel embedding (Megatron-LM's
// VocabParallelEmbedding): lookups, zero rows for ids outside the local range, the sum over
// vocabulary partitions equal to the full lookup (what the TP all-reduce computes), and the
// scatter-add backward with repeated ids.
#include <catch2/catch.hpp>

#include "kernels/embedding.hpp"
#include "test_util.hpp"

using namespace paralab::kernels;
using namespace paralab::kernels::test;

TEST_CASE("embedding forward: lookup, out-of-range zeros, partitions sum to full", "[kernels][embedding]") {
  Rng rng(50);
  const int64_t V = 37, H = 19, R = 64;
  std::vector<int32_t> ids(R);
  for (auto& id : ids) id = int32_t(rng.integer(0, V - 1));
  for (Dtype d : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
    CAPTURE(dtype_name(d));
    auto table = random_tensor(rng, V * H, d);
    Buffer full(R * H, d);
    embedding_fwd_cpu({ids.data(), table.buf.data(), full.data(), R, H, 0, V, d});
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < H; ++c) REQUIRE(full.get(r * H + c) == table.buf.get(ids[r] * H + c));
    // Split the vocabulary over 3 "ranks" (uneven), sum the partial outputs.
    const int64_t cuts[] = {0, 10, 25, V};
    std::vector<double> sum(R * H, 0.0);
    for (int t = 0; t < 3; ++t) {
      const int64_t vs = cuts[t], ve = cuts[t + 1];
      Buffer part_table(( ve - vs) * H, d);
      part_table.raw().assign(table.buf.raw().begin() + vs * H * dtype_size(d),
                              table.buf.raw().begin() + ve * H * dtype_size(d));
      Buffer part(R * H, d);
      embedding_fwd_cpu({ids.data(), part_table.data(), part.data(), R, H, vs, ve, d});
      for (int64_t r = 0; r < R; ++r) {
        const bool local = ids[r] >= vs && ids[r] < ve;
        for (int64_t c = 0; c < H; ++c) {
          if (!local) REQUIRE(part.get(r * H + c) == 0.f);
          sum[r * H + c] += part.get(r * H + c);
        }
      }
    }
    CHECK(rel_err(sum, full.f64()) == 0.0);
  }
}

TEST_CASE("embedding backward scatter-adds rows of repeated ids", "[kernels][embedding]") {
  Rng rng(51);
  const int64_t V = 11, H = 7, R = 50, vs = 3, ve = 9;
  std::vector<int32_t> ids(R);
  for (auto& id : ids) id = int32_t(rng.integer(0, V - 1));  // repeats guaranteed (R > V)
  for (Dtype d : {Dtype::f32, Dtype::bf16}) {
    auto dout = random_tensor(rng, R * H, d);
    std::vector<double> want((ve - vs) * H, 0.0);
    for (int64_t r = 0; r < R; ++r)
      if (ids[r] >= vs && ids[r] < ve)
        for (int64_t c = 0; c < H; ++c) want[(ids[r] - vs) * H + c] += dout.ref[r * H + c];
    std::vector<float> dtable((ve - vs) * H, 123.f);  // overwritten (accumulate = false)
    embedding_bwd_cpu({ids.data(), dout.buf.data(), dtable.data(), false, R, H, vs, ve, d});
    CHECK(rel_err(dtable, want) < 1e-6);
    // accumulate = true adds a second copy.
    embedding_bwd_cpu({ids.data(), dout.buf.data(), dtable.data(), true, R, H, vs, ve, d});
    for (auto& w : want) w *= 2;
    CHECK(rel_err(dtable, want) < 1e-6);
  }
}
