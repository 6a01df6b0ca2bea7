// paralab inspect of a model the step IR cannot generate yet (apps/inspect_moe.cpp).
#pragma once

#include "ir/scenario.hpp"

namespace paralab::cli {

// Prints the layout, expert groups and parameter counts (--json: `json`); returns the exit code.
int inspect_model_only(const Scenario& s, bool json);

}  // namespace paralab::cli
