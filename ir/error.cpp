// paralab — ConfigError formatting: "file:line: key = value: problem (allowed: ...)".
#include "ir/error.hpp"

namespace paralab {

std::string SourceLoc::str() const {
  if (file.empty()) return "<unknown>";
  if (line <= 0) return file;
  return file + ":" + std::to_string(line);
}

static std::string format_config_error(const SourceLoc& loc, const std::string& key,
                                       const std::string& value, const std::string& problem,
                                       const std::string& allowed) {
  std::string msg = loc.str() + ": ";
  if (!key.empty()) {
    msg += key;
    if (!value.empty()) msg += " = " + value;
    msg += ": ";
  }
  msg += problem;
  if (!allowed.empty()) msg += " (allowed: " + allowed + ")";
  return msg;
}

ConfigError::ConfigError(SourceLoc loc, std::string key, std::string value, std::string problem,
                         std::string allowed)
    : std::runtime_error(format_config_error(loc, key, value, problem, allowed)),
      loc_(std::move(loc)),
      key_(std::move(key)),
      value_(std::move(value)),
      problem_(std::move(problem)),
      allowed_(std::move(allowed)) {}

}  // namespace paralab
