// paralab — a CPU node's cores as a pool its ranks' threads take turns on (sim/engine;
// docs/simulator.md, "Shared cores").
//
// With more ranks than cores (CoreShare::Mode::node_cores), a compute op waits for a free core
// and then runs at full speed to its end; a posted communication call's thread, busy-polling,
// takes a core when one is free and gives it back when its spin window or its call ends. The
// executor's threads behave so: with more ranks than cores they take core turns, first come
// first served (exec/core_turns.hpp: an op's timing begins once its thread holds a turn, and
// at most `cores` threads of the node hold one; docs/executor.md, "Core turns"). Claims are served first come, first served per node; equal
// times keep the engine's event order, so runs are identical.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "ir/step_graph.hpp"

namespace paralab::sim {

class CorePool {
 public:
  struct Claim {
    uint32_t stage = 0;
    OpId op = 0;
    int64_t cores = 1;  // the ranks of a stage on the node run its ops together
  };

  CorePool(int64_t nodes, int64_t cores);

  // Asks `node` for c.cores cores: true when granted now, false when queued behind earlier
  // claims (first come, first served, even when a later claim would fit).
  bool acquire(int64_t node, const Claim& c);
  // Gives `cores` back to `node` and appends the queued claims that now hold theirs, in order.
  void release(int64_t node, int64_t cores, std::vector<Claim>& granted);
  [[nodiscard]] int64_t free_cores(int64_t node) const { return free_[static_cast<size_t>(node)]; }
  [[nodiscard]] bool waiting(int64_t node) const { return !queue_[static_cast<size_t>(node)].empty(); }
  [[nodiscard]] bool idle() const;  // every core free, nothing queued (end of step)

 private:
  int64_t cores_;
  std::vector<int64_t> free_;
  std::vector<std::deque<Claim>> queue_;
};

}  // namespace paralab::sim
