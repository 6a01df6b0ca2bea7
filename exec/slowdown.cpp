// paralab exec — a slowed rank's repetition plan and its scratch (slowdown.hpp).
#include "exec/slowdown.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "exec/backend.hpp"
#include "ir/error.hpp"
#include "ir/dtype.hpp"

namespace paralab::exec {

bool repeats_when_slowed(OpKind k) {
  return !is_comm(k) && k != OpKind::scaler_update && k != OpKind::xent_loss;
}

int64_t SlowdownPlan::extra_runs() const {
  int64_t n = 0;
  for (int32_t r : runs) n += r - 1;
  return n;
}

SlowdownPlan plan_slowdown(const StepGraph& g, double factor) {
  if (!std::isfinite(factor) || factor < 1.0 || factor > kMaxSlowdown)
    throw InternalError("plan_slowdown: factor " + std::to_string(factor) + " outside [1, " +
                        std::to_string(kMaxSlowdown) + "]");
  SlowdownPlan p;
  p.factor = factor;
  p.runs.assign(g.ops.size(), 1);
  const double whole = std::floor(factor), frac = factor - whole;
  int64_t j = 0;  // repeatable ops so far
  for (const Op& op : g.ops) {
    if (!repeats_when_slowed(op.kind)) continue;
    const bool more = std::floor(static_cast<double>(j + 1) * frac + 0.5) > std::floor(static_cast<double>(j) * frac + 0.5);
    p.runs[op.id] = static_cast<int32_t>(whole) + (more ? 1 : 0);
    ++j;
  }
  return p;
}

namespace {
constexpr int64_t kAlign = 256;  // bytes; cudaMalloc's alignment
int64_t aligned(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }
// One view's slot: its bytes from any offset below kAlign.
int64_t slot_bytes(const ResolvedRef& w) { return aligned(w.numel * bytes_of(w.dtype)) + kAlign; }
}  // namespace

int64_t repeat_scratch_bytes(const OpPlan& op) {
  int64_t n = 0;
  for (const ResolvedRef& w : op.writes) n += slot_bytes(w);
  return n;
}

RepeatScratch::RepeatScratch(const SlowdownPlan& slow, const RankPlan& plan, Backend& backend) : backend_(backend) {
  const StepGraph& g = *plan.graph;
  for (int s = 0; s < kStreams; ++s) {
    int64_t most = 0;
    for (OpId id : g.streams[static_cast<size_t>(s)])
      if (slow.runs_of(id) > 1) most = std::max(most, repeat_scratch_bytes(plan.ops[id]));
    if (most == 0) continue;
    const auto si = static_cast<size_t>(s);
    bytes_[si] = most;
    block_[si] = backend_.allocate(most + kAlign);  // room to start at a multiple of kAlign
    Buffer zero;  // the block as fp32 elements, for the backend's zero fill
    zero.name = "slowdown scratch";
    zero.elements = (most + kAlign) / 4;
    backend_.fill(block_[si], zero, BufferPlan{Fill::zero});
  }
}

RepeatScratch::~RepeatScratch() {
  for (size_t s = 0; s < block_.size(); ++s)
    if (block_[s]) backend_.deallocate(block_[s], bytes_[s] + kAlign);
}

std::span<void* const> RepeatScratch::writes(Stream s, const OpPlan& op, std::span<void* const> real) {
  const auto si = static_cast<size_t>(s);
  if (repeat_scratch_bytes(op) > bytes_[si] || real.size() != op.writes.size())
    throw InternalError("RepeatScratch: an op's outputs do not fit stream " + std::string(to_string(s)) + "'s scratch");
  std::vector<void*>& out = ptrs_[si];
  out.clear();
  const auto base = reinterpret_cast<uintptr_t>(block_[si]);
  auto* at = static_cast<char*>(block_[si]) + (kAlign - static_cast<int64_t>(base % kAlign)) % kAlign;
  for (size_t i = 0; i < op.writes.size(); ++i) {
    const auto misalign = static_cast<int64_t>(reinterpret_cast<uintptr_t>(real[i]) % kAlign);
    out.push_back(at + misalign);
    at += slot_bytes(op.writes[i]);
  }
  return out;
}

}  // namespace paralab::exec
