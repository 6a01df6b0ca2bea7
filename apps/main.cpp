// paralab — the command line: dispatches to a command and turns errors into messages and
// exit codes (2: bad input or usage, 1: anything else). Library code never exits.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "apps/cli.hpp"
#include "apps/commands.hpp"
#include "ir/error.hpp"

namespace {

void print_usage(std::FILE* to) {
  std::fprintf(to, "usage: paralab <command> [arguments]\n\ncommands:\n");
  for (const auto& c : paralab::cli::commands()) std::fprintf(to, "  %-10s %s\n", c.name, c.summary);
  std::fprintf(to, "\n`paralab <command> --help` shows a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    print_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const paralab::cli::Command* cmd = nullptr;
  for (const auto& c : paralab::cli::commands())
    if (!std::strcmp(c.name, argv[1])) cmd = &c;
  if (!cmd) {
    std::fprintf(stderr, "paralab: unknown command '%s'\n\n", argv[1]);
    print_usage(stderr);
    return 2;
  }
  try {
    return cmd->run(argc - 1, argv + 1);
  } catch (const paralab::ConfigError& e) {
    std::fprintf(stderr, "paralab %s: error: %s\n", cmd->name, e.what());
    return 2;
  } catch (const paralab::cli::UsageError& e) {
    std::fprintf(stderr, "paralab %s: %s\nusage: %s\n", cmd->name, e.what(), cmd->usage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paralab %s: error: %s\n", cmd->name, e.what());
    return 1;
  }
}
