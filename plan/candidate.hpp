// paralab — one layout the planner considers: the parallel degrees and the knobs that trade
// memory for time. Applying it to a scenario gives a scenario to validate and simulate.
#pragma once

#include <cstdint>
#include <string>

#include "ir/scenario.hpp"

namespace paralab {

struct Candidate {
  int64_t tensor = 1, pipeline = 1, context = 1, data = 1;
  int64_t virtual_stages = 1;
  Schedule schedule = Schedule::one_f_one_b;
  int64_t micro_batch = 1;
  int64_t zero_stage = 0;
  Recompute recompute = Recompute::none;
  bool sequence_parallel = false;
  // The embedding and loss counted as layers of the first and last stage (Megatron-LM's
  // account_for_embedding/loss_in_pipeline_split): how 126 layers run on 8 stages.
  bool count_ends = false;
  // Interleaving: Megatron-LM's microbatch_group_size_per_vp_stage (0: the pipeline size).
  int64_t microbatch_group = 0;

  // A total order (for deterministic ranking ties) and a readable label.
  [[nodiscard]] std::string key() const;
  [[nodiscard]] std::string label() const;  // "TP8 PP12 DP16 mb1 1f1b ZeRO-1 sel SP"
};

// The scenario with the candidate's layout (not validated).
Scenario apply(const Scenario& base, const Candidate& c);
// The candidate a (validated) scenario describes.
Candidate candidate_of(const Scenario& s);

}  // namespace paralab
