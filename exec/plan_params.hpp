// paralab exec — the parameter regions of a rank's plan (RankPlan::params): each model parameter
// inside the resident weights buckets with its identity in the unsharded model (layer, role,
// tensor-parallel split), found from the ops that read it (plan_rank's last step).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "exec/plan.hpp"

namespace paralab::exec {

// Appends p's parameter regions; `by_name` maps the graph's buffer names to ids, `seed` is the
// training seed.
void add_param_regions(RankPlan& p, const std::map<std::string, BufferId>& by_name, uint64_t seed);

}  // namespace paralab::exec
