// paralab — `paralab inspect --json`: the StepSummary as JSON (field names in DESIGN.md).
#pragma once

#include <nlohmann/json.hpp>

#include "ir/accounting.hpp"

namespace paralab {

nlohmann::json to_json(const StepSummary& s, const StepIR& ir);
// The layout keys of a scenario ({"tensor": 8, "pipeline": 12, ...}), shared by every report.
nlohmann::json layout_json(const Scenario& s);

}  // namespace paralab
