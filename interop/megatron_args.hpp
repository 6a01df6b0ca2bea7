// paralab interop — Megatron-LM's pretrain_gpt.py arguments (given directly, or read from a
// launch script's training command) converted into a paralab scenario. The number of GPUs
// comes from the launcher (torchrun --nproc_per_node / --nnodes), else from the script's
// GPUS_PER_NODE / NUM_NODES, else from the options; data parallelism is derived as Megatron
// does, world / (tensor x pipeline x context).
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "interop/draft.hpp"
#include "interop/import_options.hpp"
#include "interop/rule.hpp"

namespace paralab::interop {

// The table: one row per Megatron-LM argument (docs/interop.md lists it).
std::span<const Rule> megatron_rules();

// `args` as typed after `paralab import megatron` (Megatron's arguments, optionally preceded
// by a launcher and the training script: `torchrun --nproc_per_node 8 pretrain_gpt.py ...`).
ScenarioDraft import_megatron_args(const std::vector<std::string>& args, const ImportOptions& opts);

// The training command of the launch script `script`; `extra` arguments (from the command
// line) follow the script's, so they win.
ScenarioDraft import_megatron_script(const std::filesystem::path& script, const std::vector<std::string>& extra,
                                     const ImportOptions& opts);

}  // namespace paralab::interop
