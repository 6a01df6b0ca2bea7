// paralab — the command line: dispatches to a command and turns errors into messages and
// exit codes (2: bad input or usage, 1: anything else). Library code never exits.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <unistd.h>

#include "apps/cli.hpp"
#include "apps/commands.hpp"
#include "ir/error.hpp"

namespace {

void print_usage(std::FILE* to) {
  std::fprintf(to, "usage: paralab <command> [arguments]\n\ncommands:\n");
  for (const auto& c : paralab::cli::commands()) std::fprintf(to, "  %-10s %s\n", c.name, c.summary);
  std::fprintf(to, "\n`paralab <command> --help` shows a command's options.\n");
}

// SIGINT / SIGTERM: say so and exit non-zero at once (128 + signal, as shells do). Results are
// only ever written whole (cli::write_file_atomic holds these signals while it writes and
// renames), so what was not yet written is simply absent. Async-signal-safe: write and _exit.
extern "C" void on_terminate_signal(int sig) {
  static const char kInt[] = "\nparalab: interrupted (SIGINT): stopped without writing a partial result\n";
  static const char kTerm[] = "\nparalab: terminated (SIGTERM): stopped without writing a partial result\n";
  const bool is_int = sig == SIGINT;
  ssize_t n = ::write(STDERR_FILENO, is_int ? kInt : kTerm, (is_int ? sizeof kInt : sizeof kTerm) - 1);
  (void)n;
  ::_exit(128 + sig);
}

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_terminate_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
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
  install_signal_handlers();
  try {
    return cmd->run(argc - 1, argv + 1);
  } catch (const paralab::ConfigError& e) {
    std::fprintf(stderr, "paralab %s: error: %s\n", cmd->name, e.what());
    return 2;
  } catch (const paralab::cli::UsageError& e) {
    std::fprintf(stderr, "paralab %s: %s\nusage: %s\n", cmd->name, e.what(), cmd->usage);
    return 2;
  } catch (const paralab::cli::InputError& e) {
    std::fprintf(stderr, "paralab %s: error: %s\n", cmd->name, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "paralab %s: error: %s\n", cmd->name, e.what());
    return 1;
  }
}
