// paralab — command-line plumbing shared by every command: argument parsing with typed
// errors, `--set` collection, and outputs written atomically (never a partial file).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace paralab::cli {

// Bad command-line usage (unknown option, missing argument): exit code 2 with usage text.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad input that is not a usage mistake nor a configuration key: a file the command was given
// that it cannot use (unreadable, not a paralab result) or files that do not belong together
// (results of different scenarios, with different ops). Exit code 2, no usage text; the message
// names the file.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct OptionSpec {
  std::string name;      // "--trace"
  bool takes_value;      // "--trace FILE" vs "--json"
  std::string help;
};

struct Args {
  std::vector<std::string> positional;
  std::vector<std::string> sets;                 // every --set section.key=value
  std::map<std::string, std::string> values;     // --option VALUE
  std::map<std::string, bool> flags;             // --flag

  [[nodiscard]] bool flag(const std::string& name) const { return flags.count(name) > 0; }
  [[nodiscard]] std::optional<std::string> value(const std::string& name) const;
  [[nodiscard]] std::string require_positional(size_t i, const std::string& what) const;
};

// Parses argv after the command name. `--set` and `--json` are always accepted.
Args parse(int argc, char** argv, int first, const std::vector<OptionSpec>& options);

std::string options_help(const std::vector<OptionSpec>& options);

// `v` as a number if the whole of it is one (std::stod's syntax), else nothing.
std::optional<double> to_number(const std::string& v);

// `v` as a number in [lo, hi] (seconds, ratios); else a UsageError naming `opt`, the value and
// the range.
double parse_number(const std::string& opt, const std::string& v, double lo, double hi);

// Writes `content` to `path` through a temporary file and a rename, so a failure never leaves
// a partial result behind.
void write_file_atomic(const std::filesystem::path& path, const std::string& content);

// An output file named by option `opt` (or a trace prefix: its files go beside it) that cannot
// be written is refused before the work that would fill it: its folder must exist and be
// writable, and the path must not be a folder. Else an InputError naming the option, the path
// and why (exit code 2): a calibration or a validation takes minutes, and losing them to a
// typo in an output path is what this check is for.
void check_writable(const std::string& opt, const std::filesystem::path& path, bool prefix = false);

// check_writable for each of these output-file options that `a` has. Called by every command
// right after parsing.
void check_outputs(const Args& a, const std::vector<std::string>& options);

}  // namespace paralab::cli
