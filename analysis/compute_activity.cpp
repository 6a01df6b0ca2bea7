// paralab — when each rank of an executed step was computing (semantics in compute_activity.hpp).
#include "analysis/compute_activity.hpp"

#include <algorithm>
#include <string>

#include "ir/error.hpp"

namespace paralab::calib {

ComputeActivity::ComputeActivity(const Layout& layout) : layout_(layout), spans_(static_cast<size_t>(layout.world())) {}

void ComputeActivity::add(int64_t rank, double from_us, double until_us) {
  if (finished_) throw InternalError("ComputeActivity: add() after finish()");
  if (rank < 0 || rank >= layout_.world())
    throw InternalError("ComputeActivity: rank " + std::to_string(rank) + " outside the layout's " +
                        std::to_string(layout_.world()));
  if (until_us > from_us) spans_[static_cast<size_t>(rank)].emplace_back(from_us, until_us);
}

void ComputeActivity::finish() {
  for (auto& v : spans_) {
    std::sort(v.begin(), v.end());
    // Merge overlaps (an op and the gap after it touch; clocks may overlap by a hair).
    size_t w = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      if (w > 0 && v[i].first <= v[w - 1].second) v[w - 1].second = std::max(v[w - 1].second, v[i].second);
      else v[w++] = v[i];
    }
    v.resize(w);
  }
  finished_ = true;
}

bool ComputeActivity::computing(int64_t rank, double t_us) const {
  const auto& v = spans_[static_cast<size_t>(rank)];
  // The last span starting at or before t: t lies in it when before its end.
  auto it = std::upper_bound(v.begin(), v.end(), t_us, [](double t, const std::pair<double, double>& s) { return t < s.first; });
  return it != v.begin() && t_us < std::prev(it)->second;
}

int64_t ComputeActivity::busy_ranks(int64_t rank, double t_us) const {
  if (!finished_) throw InternalError("ComputeActivity: busy_ranks() before finish()");
  const int64_t node = layout_.node_of(rank);
  const int64_t own = layout_.stage_of(rank);
  // Per stage: computing (any of its ranks on the node) and its ranks on the node.
  std::vector<uint8_t> on(static_cast<size_t>(layout_.pp()), 0);
  std::vector<int64_t> ranks(static_cast<size_t>(layout_.pp()), 0);
  on[static_cast<size_t>(own)] = 1;
  for (int64_t r = 0; r < layout_.world(); ++r) {
    if (layout_.node_of(r) != node) continue;
    const auto s = static_cast<size_t>(layout_.stage_of(r));
    ++ranks[s];
    if (!on[s] && computing(r, t_us)) on[s] = 1;
  }
  int64_t n = 0;
  for (size_t s = 0; s < on.size(); ++s)
    if (on[s]) n += ranks[s];
  return n;
}

}  // namespace paralab::calib
