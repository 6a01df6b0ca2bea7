// paralab — checkers of the event engine's invariants (docs/hardening.md, "Simulator
// invariants"): time never goes backwards, every op runs exactly once, every byte sent is
// received (transfers matched with equal sizes, nothing left unmatched), and memory returns to
// its steady state (only resident buffers live) after the step. Each is a plain function of
// plain data so a test can feed it a corrupted input; the engine calls them when
// EngineOptions::check_invariants is on (default: debug builds). A violation throws
// InternalError: it is a bug in the simulator or the IR, never the user's.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ir/step_graph.hpp"
#include "sim/net/invariants.hpp"

namespace paralab::sim {

// Events closer than this are one event (the network's tie window, flow_solver.hpp).
inline double invariant_time_slack(double t_us) { return 2 * (1e-9 + 1e-12 * std::abs(t_us)); }

// The engine's clock: the next event is not earlier than the current time.
inline void check_clock(double now_us, double next_us, const char* source) {
  if (!(next_us >= now_us - invariant_time_slack(now_us)))
    invariant_violated("time order", std::string(source) + " event at " + std::to_string(next_us) +
                                         " us after the clock reached " + std::to_string(now_us) + " us");
}

// A compute op's duration is a time span: finite and not negative.
inline void check_duration(int64_t stage, const Op& op, double dur_us) {
  if (!(dur_us >= 0) || !std::isfinite(dur_us))
    invariant_violated("time order", "stage " + std::to_string(stage) + " op " + op.full_name() +
                                         " has duration " + std::to_string(dur_us) + " us");
}

// Causality of one stage's timeline: every op starts at or after 0, ends at or after it
// starts, and starts after every op in its deps and its predecessor on its stream ended.
inline void check_causality(const StepGraph& g, std::span<const double> start, std::span<const double> end,
                            int64_t stage) {
  const size_t n = g.ops.size();
  if (start.size() != n || end.size() != n)
    invariant_violated("time order", "stage " + std::to_string(stage) + ": timings of " +
                                         std::to_string(start.size()) + " ops for a graph of " + std::to_string(n));
  auto fail = [&](OpId id, const std::string& what) {
    invariant_violated("time order", "stage " + std::to_string(stage) + " op " + g.ops[id].full_name() + " (" +
                                         std::to_string(id) + ") " + what);
  };
  for (OpId id = 0; id < n; ++id) {
    if (!(start[id] >= 0) || !std::isfinite(end[id])) fail(id, "has no valid time span");
    if (end[id] < start[id]) fail(id, "ends at " + std::to_string(end[id]) + " us before it starts at " +
                                          std::to_string(start[id]) + " us");
    for (OpId d : g.ops[id].deps) {
      if (d >= n) fail(id, "depends on a missing op");
      if (start[id] < end[d] - invariant_time_slack(end[d]))
        fail(id, "starts at " + std::to_string(start[id]) + " us before its dependency " + g.ops[d].full_name() +
                     " ends at " + std::to_string(end[d]) + " us");
    }
  }
  for (const auto& stream : g.streams)
    for (size_t i = 1; i < stream.size(); ++i) {
      const OpId a = stream[i - 1], b = stream[i];
      if (a >= n || b >= n) invariant_violated("time order", "stage " + std::to_string(stage) + ": stream lists a missing op");
      if (start[b] < end[a] - invariant_time_slack(end[a]))
        fail(b, "starts at " + std::to_string(start[b]) + " us before its stream predecessor " + g.ops[a].full_name() +
                    " ends at " + std::to_string(end[a]) + " us");
    }
}

// Every op of a stage started exactly once and finished exactly once.
inline void check_ran_once(const StepGraph& g, std::span<const uint32_t> starts, std::span<const uint32_t> finishes,
                           int64_t stage) {
  if (starts.size() != g.ops.size() || finishes.size() != g.ops.size())
    invariant_violated("ops run once", "stage " + std::to_string(stage) + ": counts for " +
                                           std::to_string(starts.size()) + " ops, graph has " + std::to_string(g.ops.size()));
  for (OpId id = 0; id < g.ops.size(); ++id)
    if (starts[id] != 1 || finishes[id] != 1)
      invariant_violated("ops run once", "stage " + std::to_string(stage) + " op " + g.ops[id].full_name() +
                                             " started " + std::to_string(starts[id]) + " times and finished " +
                                             std::to_string(finishes[id]) + " times");
}

// A pipeline transfer: the send and the receive it is matched with move the same bytes.
inline void check_transfer_sizes(const Op& send, int64_t send_bytes, const Op& recv, int64_t recv_bytes) {
  if (send_bytes != recv_bytes)
    invariant_violated("bytes delivered", send.full_name() + " sends " + std::to_string(send_bytes) + " bytes but " +
                                              recv.full_name() + " receives " + std::to_string(recv_bytes));
}

// At the end of a step nothing is left half-matched: `unmatched` lists what is (a send without
// its receive, a cross-stage collective some stage never joined).
inline void check_all_matched(const std::vector<std::string>& unmatched) {
  if (unmatched.empty()) return;
  std::string what;
  for (size_t i = 0; i < unmatched.size() && i < 8; ++i) what += (i ? "; " : "") + unmatched[i];
  if (unmatched.size() > 8) what += "; ... (" + std::to_string(unmatched.size()) + " in all)";
  invariant_violated("bytes delivered", "unmatched at the end of the step: " + what);
}

// Per-buffer lifecycle as the engine replays it.
enum class BufferState : uint8_t { unallocated, live, freed };

// Allocation (`alloc` true) or free of buffer b by op `by`: a transient buffer is allocated
// once, then freed once; a resident buffer is never allocated or freed by an op.
inline void check_buffer_transition(const StepGraph& g, BufferId b, BufferState& state, bool alloc, const Op& by,
                                    int64_t stage) {
  auto fail = [&](const std::string& what) {
    invariant_violated("memory steady state", "stage " + std::to_string(stage) + " op " + by.full_name() + " " + what +
                                                  " buffer '" + (b < g.buffers.size() ? g.buffers[b].name : "?") + "'");
  };
  if (b >= g.buffers.size()) fail(alloc ? "allocates a missing" : "frees a missing");
  if (g.buffers[b].resident) fail(alloc ? "allocates the resident" : "frees the resident");
  if (alloc) {
    if (state != BufferState::unallocated) fail(state == BufferState::live ? "allocates the live" : "allocates the freed");
    state = BufferState::live;
  } else {
    if (state != BufferState::live) fail(state == BufferState::freed ? "frees the already freed" : "frees the unallocated");
    state = BufferState::freed;
  }
}

// After the step only resident buffers are live: no transient buffer still allocated and no
// transient bytes counted by any category.
inline void check_memory_steady(const StepGraph& g, std::span<const BufferState> states,
                                const std::array<double, kMemCategories>& live_bytes, int64_t stage) {
  for (BufferId b = 0; b < states.size() && b < g.buffers.size(); ++b)
    if (states[b] == BufferState::live)
      invariant_violated("memory steady state", "stage " + std::to_string(stage) + ": buffer '" + g.buffers[b].name +
                                                    "' is still allocated after the step");
  for (int c = 0; c < kMemCategories; ++c)
    if (!(std::abs(live_bytes[static_cast<size_t>(c)]) <= 0.5))
      invariant_violated("memory steady state", "stage " + std::to_string(stage) + ": " +
                                                    std::to_string(live_bytes[static_cast<size_t>(c)]) + " bytes of " +
                                                    std::string(to_string(static_cast<MemCategory>(c))) +
                                                    " still live after the step");
}

}  // namespace paralab::sim
