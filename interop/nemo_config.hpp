// paralab interop — a NeMo 1.x / NeMo-Framework-Launcher training YAML (trainer:, model:,
// exp_manager: ...) converted into a paralab scenario. NeMo 2.0 and Megatron-Bridge recipes
// are Python programs, not configuration files: they are refused with that message.
#pragma once

#include <filesystem>
#include <span>

#include "interop/draft.hpp"
#include "interop/import_options.hpp"
#include "interop/rule.hpp"

namespace paralab::interop {

// The table: one row per NeMo key, or per family of keys (docs/interop.md lists it).
std::span<const Rule> nemo_rules();

ScenarioDraft import_nemo(const std::filesystem::path& yaml, const ImportOptions& opts);

}  // namespace paralab::interop
