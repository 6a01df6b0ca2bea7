// paralab interop — a YAML configuration (NeMo / Hydra / OmegaConf) as a flat list of items,
// "model.optim.lr" = value, each with its line. OmegaConf interpolations are resolved where they
// only refer to other keys (${model.num_layers}, ${.encoder_seq_length}, ${..hidden_size}; the
// launcher's ${training.model.x} too) or use the launcher's ${multiply:a,b} and ${sum:a,b};
// any other (${oc.env:X}, ${data_dir} when not a key) and OmegaConf's mandatory `???` stay
// unresolved, with the reason, for the importer to report.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "interop/draft.hpp"

namespace paralab::interop {

// Every leaf of the file in file order: scalars (null kept as null), sequences (their items
// as values; a nested item as its YAML text). An empty mapping is a leaf without values.
// Throws ConfigError naming the file and line of a YAML syntax error.
std::vector<SourceItem> read_yaml_items(const std::filesystem::path& path);
std::vector<SourceItem> parse_yaml_items(const std::string& text, const std::string& file);

}  // namespace paralab::interop
