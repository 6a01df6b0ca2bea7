// paralab — argument parsing and atomic output files.
#include "apps/cli.hpp"

#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>

namespace paralab::cli {

std::optional<std::string> Args::value(const std::string& name) const {
  auto it = values.find(name);
  if (it == values.end()) return std::nullopt;
  return it->second;
}

std::string Args::require_positional(size_t i, const std::string& what) const {
  if (i >= positional.size()) throw UsageError("missing argument: " + what);
  return positional[i];
}

Args parse(int argc, char** argv, int first, const std::vector<OptionSpec>& options) {
  Args a;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      a.positional.push_back(arg);
      continue;
    }
    std::string name = arg, inline_value;
    bool has_inline = false;
    if (auto eq = arg.find('='); eq != std::string::npos && arg.rfind("--set", 0) != 0) {
      name = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
      has_inline = true;
    }
    auto next_value = [&](const std::string& opt) {
      if (has_inline) return inline_value;
      if (i + 1 >= argc) throw UsageError(opt + " needs a value");
      return std::string(argv[++i]);
    };
    if (name == "--set" || name.rfind("--set=", 0) == 0) {
      a.sets.push_back(name == "--set" ? next_value("--set") : name.substr(6));
      continue;
    }
    if (name == "--json") {
      a.flags["--json"] = true;
      continue;
    }
    const OptionSpec* spec = nullptr;
    for (const auto& o : options)
      if (o.name == name) spec = &o;
    if (!spec) throw UsageError("unknown option " + name);
    if (spec->takes_value) a.values[name] = next_value(name);
    else a.flags[name] = true;
  }
  return a;
}

std::optional<double> to_number(const std::string& v) {
  try {
    size_t used = 0;
    const double x = std::stod(v, &used);
    if (used == v.size()) return x;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

double parse_number(const std::string& opt, const std::string& v, double lo, double hi) {
  const std::optional<double> x = to_number(v);
  if (!x || !(*x >= lo && *x <= hi)) {
    char range[64];
    std::snprintf(range, sizeof range, "[%g, %g]", lo, hi);
    throw UsageError(opt + " needs a number in " + range + ", got '" + v + "'");
  }
  return *x;
}

std::string options_help(const std::vector<OptionSpec>& options) {
  std::string out = "  --set section.key=value  override any scenario key (repeatable)\n"
                    "  --json                   machine-readable output\n";
  for (const auto& o : options) {
    std::string left = o.name + (o.takes_value ? " VALUE" : "");
    left.resize(std::max<size_t>(left.size() + 1, 25), ' ');
    out += "  " + left + o.help + "\n";
  }
  return out;
}

namespace {

// SIGINT and SIGTERM are held while a result is written and renamed into place, so an
// interruption lands before the temporary file exists or after the rename: never a half-written
// result, never a stray temporary (the handler in main.cpp then reports and exits).
class DeferSignals {
 public:
  DeferSignals() {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &s, &old_);
  }
  ~DeferSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  DeferSignals(const DeferSignals&) = delete;
  DeferSignals& operator=(const DeferSignals&) = delete;

 private:
  sigset_t old_{};
};

}  // namespace

void write_file_atomic(const std::filesystem::path& path, const std::string& content) {
  const DeferSignals defer;
  const std::filesystem::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw std::runtime_error("cannot write " + path.string());
    f << content;
    f.flush();
    if (!f) {
      f.close();
      std::filesystem::remove(tmp);
      throw std::runtime_error("cannot write " + path.string());
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    throw std::runtime_error("cannot write " + path.string() + ": " + ec.message());
  }
}

void check_writable(const std::string& opt, const std::filesystem::path& path, bool prefix) {
  const auto refuse = [&](const std::string& why) { throw InputError(opt + " " + path.string() + ": " + why); };
  if (path.empty()) refuse("an empty path");
  std::error_code ec;
  if (!prefix && std::filesystem::is_directory(path, ec)) refuse("is a folder, not a file");
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  if (!std::filesystem::is_directory(dir, ec)) refuse("its folder " + dir.string() + " does not exist");
  if (::access(dir.c_str(), W_OK) != 0) refuse("its folder " + dir.string() + " is not writable");
}

void check_outputs(const Args& a, const std::vector<std::string>& options) {
  for (const std::string& o : options)
    if (auto v = a.value(o)) check_writable(o, *v);
}

}  // namespace paralab::cli
