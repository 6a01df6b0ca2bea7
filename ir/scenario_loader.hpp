// paralab — loads a scenario file (+ its model preset + `--set` overrides) into a validated
// Scenario, with its topology resolved. The only place scenario keys are spelled.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "ir/scenario.hpp"

namespace paralab {

// Loads and validates. `overrides` are "section.key=value" strings from `--set`; keys under
// "topology." override the topology file. Throws ConfigError (file, line, key, value, allowed).
// With `check_layout` false (the planner, which builds and validates layouts itself) the
// parallel layout is left unvalidated and `parallel.data` is 0 unless the file sets it.
Scenario load_scenario(const std::filesystem::path& file,
                       const std::vector<std::string>& overrides = {}, bool check_layout = true);

// The model presets shipped in <data_dir>/scenarios/presets.
std::vector<std::string> shipped_presets();

// Every check that relates keys to each other (divisibility, world size, batch, device
// support). Called by load_scenario; exposed for the planner, which builds layouts itself.
void validate_scenario(const Scenario& s);
// The subset that does not depend on the data-parallel size (run before inferring it).
void validate_model_and_splits(const Scenario& s);

}  // namespace paralab
