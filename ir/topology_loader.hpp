// paralab — loads topologies/*.toml into a validated Topology.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "ir/raw_config.hpp"
#include "ir/topology.hpp"

namespace paralab {

// Where paralab's own data (topologies/, scenarios/presets/) lives: $PARALAB_DATA_DIR if set,
// else the source tree the binary was built from.
std::filesystem::path data_dir();

// Resolves `cluster.topology`: a path (contains '/' or ends in .toml) relative to `relative_to`,
// else a name looked up as <data_dir>/topologies/<name>.toml. Throws ConfigError at `where`.
std::filesystem::path resolve_topology(const std::string& name_or_path,
                                       const std::filesystem::path& relative_to,
                                       const SourceLoc& where, const std::string& key);

// Reads and validates a topology file; `overrides` are "topology.section.key" values from
// `--set`, applied after the file. Throws ConfigError naming file, line, key and value.
Topology load_topology(const std::filesystem::path& file,
                       const std::vector<std::pair<std::string, RawValue>>& overrides = {});

// Names of the topologies shipped in <data_dir>/topologies (for error messages and listings).
std::vector<std::string> shipped_topologies();

}  // namespace paralab
