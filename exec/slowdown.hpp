// paralab exec — a slowed rank (`execute --slow-rank R --slowdown F`, docs/executor.md "A slowed
// rank"): each compute op of rank R runs ⌊F⌋ times, and a fraction F − ⌊F⌋ of them once more, so
// the rank computes F times as long on average and nothing sleeps. Communication runs once.
//
// The extra runs must not change the step's results (gradients accumulate, optimizers update in
// place), so they write into per-stream scratch (RepeatScratch) and read the op's real inputs:
// the op's last run is its only real one.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "exec/plan.hpp"
#include "ir/op_kind.hpp"
#include "ir/step_graph.hpp"

namespace paralab::exec {

class Backend;

// The largest slowdown a run accepts (a larger one is a mistake, not a straggler).
constexpr double kMaxSlowdown = 100.0;

// Whether ops of kind `k` repeat on a slowed rank: every compute op except the two that advance
// the backend's own state (scaler_update steps the loss scale; the CUDA backend adds xent_loss
// into the step's loss). Both are a handful of elements; communication never repeats.
[[nodiscard]] bool repeats_when_slowed(OpKind k);

struct SlowdownPlan {
  double factor = 1.0;
  std::vector<int32_t> runs;  // per op id: how many times it runs (empty: every op once)

  [[nodiscard]] int32_t runs_of(OpId id) const { return runs.empty() ? 1 : runs[id]; }
  // Runs beyond the first, summed over the step's ops.
  [[nodiscard]] int64_t extra_runs() const;
};

// The plan of `g` slowed by `factor` (in [1, kMaxSlowdown]; else InternalError: callers check
// input). The fractional part picks its ops by error diffusion in op-id order: repeatable op j
// (from 0) runs once more when ⌊(j+1)·frac + ½⌋ > ⌊j·frac + ½⌋, so exactly round(n·frac) of the
// n repeatable ops do, spread evenly, the same on every run.
[[nodiscard]] SlowdownPlan plan_slowdown(const StepGraph& g, double factor);

// Where a slowed rank's extra runs write: a block per stream, as large as the largest repeated
// op's outputs on it, zeroed once. Each view sits at its real view's address modulo 256 bytes,
// so alignment-keyed choices (cuBLASLt's algorithms, vector loads) are the real run's. The extra
// runs read the op's real inputs; outputs they also read (an accumulation's C, an optimizer's
// state) come from the scratch, which costs the same. Memory the IR does not count: RSS shows it.
class RepeatScratch {
 public:
  RepeatScratch(const SlowdownPlan& slow, const RankPlan& plan, Backend& backend);
  ~RepeatScratch();
  RepeatScratch(const RepeatScratch&) = delete;
  RepeatScratch& operator=(const RepeatScratch&) = delete;

  // The write pointers for an extra run of `op` on stream `s` (its worker thread only), given
  // the real run's write pointers `real`.
  [[nodiscard]] std::span<void* const> writes(Stream s, const OpPlan& op, std::span<void* const> real);
  [[nodiscard]] int64_t bytes(Stream s) const { return bytes_[static_cast<size_t>(s)]; }

 private:
  Backend& backend_;
  std::array<void*, kStreams> block_{};
  std::array<int64_t, kStreams> bytes_{};
  std::array<std::vector<void*>, kStreams> ptrs_;
};

// Bytes of scratch one extra run of `op` needs: per write view its bytes rounded up to 256,
// plus 256 for its offset.
[[nodiscard]] int64_t repeat_scratch_bytes(const OpPlan& op);

}  // namespace paralab::exec
