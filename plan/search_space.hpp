// paralab — the layouts the planner enumerates: every combination of tensor, pipeline and
// context sizes (data fills the cluster), virtual stages and schedule, micro-batch size, ZeRO
// stage, recomputation and sequence parallelism — minus the keys the scenario pins. Bounds
// (`SearchBounds`) leave out layouts that are valid but never competitive; they are counted.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "plan/candidate.hpp"

namespace paralab {

struct SearchBounds {
  int64_t max_tensor = 0;        // 0: the devices of one node (TP across nodes: Narayanan et al. 2021, Sec. 3.3)
  int64_t max_micro_batch = 8;   // larger micro-batches rarely fit and never fill the GPU better
  int64_t min_context_tokens = 2048;  // context parallelism only while each rank keeps >= this many tokens
  int64_t max_virtual_stages = 8;     // interleaving beyond this moves more than it saves (Narayanan et al. 2021, Fig. 12)
  std::vector<Schedule> schedules;    // the schedules to search (empty: all); e.g. what the user's framework runs
};

struct SearchSpace {
  std::vector<int64_t> tensor, pipeline, context, micro_batch, zero_stage;
  std::vector<Recompute> recompute;
  std::vector<bool> sequence_parallel;
  bool pin_virtual = false, pin_schedule = false;
  int64_t virtual_stages = 1;
  Schedule schedule = Schedule::one_f_one_b;
  int64_t data = 0;  // pinned data size, or 0
};

// The dimensions left free by the scenario (keys set in the file or by --set are pinned).
SearchSpace search_space(const Scenario& base, const SearchBounds& bounds);

// Calls `visit` for every candidate of the space (data derived from the cluster), and counts
// in `excluded` the combinations left out by the bounds, by reason.
void enumerate(const Scenario& base, const SearchSpace& space, const SearchBounds& bounds,
               const std::function<void(const Candidate&)>& visit, std::map<std::string, int64_t>& excluded);

}  // namespace paralab
