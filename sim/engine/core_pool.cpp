// paralab — a CPU node's cores as a first-come-first-served pool (semantics in core_pool.hpp).
#include "sim/engine/core_pool.hpp"

#include <string>

#include "ir/error.hpp"

namespace paralab::sim {

CorePool::CorePool(int64_t nodes, int64_t cores)
    : cores_(cores), free_(static_cast<size_t>(nodes), cores), queue_(static_cast<size_t>(nodes)) {
  if (nodes < 1 || cores < 1)
    throw InternalError("CorePool: needs at least one node and one core (" + std::to_string(nodes) + " nodes, " +
                        std::to_string(cores) + " cores)");
}

bool CorePool::acquire(int64_t node, const Claim& c) {
  if (c.cores < 1 || c.cores > cores_)
    throw InternalError("CorePool: a claim of " + std::to_string(c.cores) + " cores on a node of " + std::to_string(cores_));
  const auto n = static_cast<size_t>(node);
  if (queue_[n].empty() && free_[n] >= c.cores) {
    free_[n] -= c.cores;
    return true;
  }
  queue_[n].push_back(c);
  return false;
}

void CorePool::release(int64_t node, int64_t cores, std::vector<Claim>& granted) {
  const auto n = static_cast<size_t>(node);
  free_[n] += cores;
  if (free_[n] > cores_) throw InternalError("CorePool: more cores given back than taken on node " + std::to_string(node));
  while (!queue_[n].empty() && free_[n] >= queue_[n].front().cores) {
    free_[n] -= queue_[n].front().cores;
    granted.push_back(queue_[n].front());
    queue_[n].pop_front();
  }
}

bool CorePool::idle() const {
  for (size_t n = 0; n < free_.size(); ++n)
    if (free_[n] != cores_ || !queue_[n].empty()) return false;
  return true;
}

}  // namespace paralab::sim
