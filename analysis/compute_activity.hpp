// paralab — when each rank of an executed step was computing, and how many ranks of a node
// were at a given moment (docs/calibration.md, "In-situ execution": the dispatch gap by busy
// ranks, Calibration::dispatch).
//
//   calib::ComputeActivity a(layout);
//   a.add(rank, start_us, until_us);        // a compute op, or it and the plain gap after it
//   a.finish();
//   int64_t n = a.busy_ranks(rank, t_us);   // ranks of the rank's node computing at t
//
// A rank computes while a compute op of it runs, and in the gap before its next compute op when
// that op waited only for its stream predecessor (the compute thread is then between ops, not
// waiting for a call). As in the simulator, which runs one representative per pipeline stage,
// a stage counts with all of its ranks on the node once any of them computes, and the asking
// rank's stage always counts (it is in its own gap). The ranks of one host share its steady
// clock (exec/runtime: every op is timed on it), so their intervals compare directly.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "ir/layout.hpp"

namespace paralab::calib {

class ComputeActivity {
 public:
  explicit ComputeActivity(const Layout& layout);

  // Rank `rank` computed over [from_us, until_us) (ignored when empty). Before finish().
  void add(int64_t rank, double from_us, double until_us);
  // Sorts and merges each rank's intervals; add() may not follow.
  void finish();

  // The ranks on `rank`'s node whose stage computes at t_us, the asking rank's stage included
  // (at least its ranks there). After finish().
  [[nodiscard]] int64_t busy_ranks(int64_t rank, double t_us) const;

 private:
  [[nodiscard]] bool computing(int64_t rank, double t_us) const;

  const Layout& layout_;
  std::vector<std::vector<std::pair<double, double>>> spans_;  // per rank, merged, sorted
  bool finished_ = false;
};

}  // namespace paralab::calib
