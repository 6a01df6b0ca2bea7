// paralab — the command registry: `paralab <command> ...`. A new command is a new
// cmd_<name>.cpp with a `run_<name>` function and one row in commands.cpp.
#pragma once

#include <span>

namespace paralab::cli {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);  // argv[0] is the command name
  const char* usage;
};

std::span<const Command> commands();

int run_inspect(int argc, char** argv);
int run_execute(int argc, char** argv);
int run_simulate(int argc, char** argv);
int run_compare(int argc, char** argv);
int run_plan(int argc, char** argv);
int run_calibrate(int argc, char** argv);
int run_validate(int argc, char** argv);
int run_import(int argc, char** argv);
int run_export(int argc, char** argv);

}  // namespace paralab::cli
