// paralab — helpers for the hardening tests: scenarios from inline TOML and the repository's
// own files.
#pragma once

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "ir/scenario_loader.hpp"

namespace paralab::hardening {

inline std::filesystem::path source_dir() { return PARALAB_SOURCE_DIR; }

// A fresh scratch directory, removed when the returned object goes out of scope.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static std::atomic<int> n{0};
    path = std::filesystem::temp_directory_path() /
           ("paralab-hardening-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// Loads a scenario written inline (through a temporary file named scenario.toml).
inline Scenario load_text(const std::string& toml, const std::vector<std::string>& sets = {}) {
  TempDir d;
  const auto file = d.path / "scenario.toml";
  std::ofstream(file) << toml;
  return load_scenario(file, sets);
}

// The files with extension .toml in `dir`, sorted.
inline std::vector<std::filesystem::path> toml_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".toml") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace paralab::hardening
