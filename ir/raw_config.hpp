// paralab — configuration as read, before typing: a flat map "section.key" -> value with the
// place each value came from. The TOML parser stays behind this header (ir/raw_config.cpp) so
// nothing else, and no CUDA translation unit, ever includes TOML++.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "ir/error.hpp"

namespace paralab {

struct RawValue {
  enum class Type : uint8_t { integer, floating, boolean, string, other };
  Type type = Type::other;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string s;
  std::string text;  // the value as written, for error messages
  SourceLoc loc;

  [[nodiscard]] std::string_view type_name() const;
};

// "section.key" -> value; top-level keys have no section ("preset", "name", ...).
using RawTable = std::map<std::string, RawValue>;

// An array of tables (e.g. [[calibration.gemm]]): each element a flat "key" -> value map.
using RawArray = std::vector<RawTable>;

struct RawFile {
  std::string file;
  RawTable values;
  std::map<std::string, RawArray> arrays;          // "calibration.gemm" -> entries
  std::map<std::string, SourceLoc> sections;       // "model" -> where [model] starts
};

// Reads a TOML file. Tables nest at most one level ([section] key = value); arrays of tables
// are collected under `arrays`. Throws ConfigError for missing/unreadable files, syntax errors
// and unsupported shapes (deeper nesting, arrays of values), naming file and line.
RawFile read_toml_file(const std::filesystem::path& path);

// Parses one `--set section.key=value` override. The value is read as a TOML value when it is
// one (42, 2.5, true, "text") and as a bare string otherwise (gelu, dgx-a100).
std::pair<std::string, RawValue> parse_override(const std::string& assignment);

}  // namespace paralab
