// paralab simulate --chakra DIR — replays a folder of Chakra execution traces on a topology
// (chakra/chakra_import.hpp reads them, sim/replay/replay.hpp simulates every rank) and reports
// the step time, its critical path and every rank's busy times.
#pragma once

#include <string>

#include "apps/cli.hpp"

namespace paralab::cli {

// `--topology NAME|FILE` picks the hardware; without it, the topology the traces name (paralab's
// own exports do). Prints a table, or JSON with --json.
int simulate_chakra(const Args& a, const std::string& dir);

}  // namespace paralab::cli
