// paralab interop — reads a bash launch script the way bash would run it, as far as its
// training command goes: variable and array assignments, if/elif/else on tests paralab can
// decide ([ -n ], [ -z ], ==, !=, -eq ...), and the one command that runs a training script
// (pretrain_gpt.py or another pretrain_*.py). The result is that command's words, split into
// the launcher (torchrun and its options) and the training script's arguments.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "interop/shell_env.hpp"

namespace paralab::interop {

struct ScriptWord {
  std::string text;
  int line = 0;
  std::string unresolved;  // non-empty: only the running shell knows it; why
};

struct LaunchCommand {
  std::string file;
  std::vector<ScriptWord> launcher;  // the words before the training script (torchrun, --nproc_per_node 8, ...)
  ScriptWord script;                 // pretrain_gpt.py
  std::vector<ScriptWord> args;      // the training script's arguments
  std::vector<std::string> notes;    // what was assumed: conditions not decided, unset variables
  ShellEnv env;                      // the variables when the command ran (GPUS_PER_NODE, NUM_NODES, ...)
};

// The training script's name if `word` runs one: its file name is pretrain_*.py.
bool is_training_script(const std::string& word);

// Reads the script at `path`. Throws ConfigError naming the file (and line) when it cannot be
// read, has no training command, or runs more than one.
LaunchCommand read_launch_script(const std::filesystem::path& path);
// The same for script text; `file` names it in errors.
LaunchCommand parse_launch_script(const std::string& text, const std::string& file);

}  // namespace paralab::interop
