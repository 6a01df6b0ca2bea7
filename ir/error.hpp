// paralab — typed errors for bad user input.
// A ConfigError names where the bad value came from (file and line, or the command line),
// the key, the value, what is wrong and what is allowed, so a user can fix it without a manual.
#pragma once

#include <stdexcept>
#include <string>

namespace paralab {

// Where a value came from: a file and line, or a `--set` override on the command line.
struct SourceLoc {
  std::string file;  // path as the user gave it; "--set" for command-line overrides
  int line = 0;      // 1-based; 0 when unknown
  int column = 0;

  [[nodiscard]] std::string str() const;
};

class ConfigError : public std::runtime_error {
 public:
  ConfigError(SourceLoc loc, std::string key, std::string value, std::string problem,
              std::string allowed);

  [[nodiscard]] const SourceLoc& loc() const { return loc_; }
  [[nodiscard]] const std::string& key() const { return key_; }
  [[nodiscard]] const std::string& value() const { return value_; }
  [[nodiscard]] const std::string& problem() const { return problem_; }
  [[nodiscard]] const std::string& allowed() const { return allowed_; }

 private:
  SourceLoc loc_;
  std::string key_, value_, problem_, allowed_;
};

// Errors in paralab's own files that are not the user's fault surface as this (a bug report).
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

}  // namespace paralab
