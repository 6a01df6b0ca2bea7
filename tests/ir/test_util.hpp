// paralab tests — helpers: temporary scenario files and scenario construction from TOML text.
#pragma once

#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "ir/scenario_loader.hpp"

namespace paralab::test {

// A file in a fresh temporary directory, removed with the object.
class TempFile {
 public:
  explicit TempFile(const std::string& content, const std::string& name = "scenario.toml") {
    static std::atomic<int> counter{0};
    dir_ = std::filesystem::temp_directory_path() /
           ("paralab-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(dir_);
    path_ = dir_ / name;
    std::ofstream(path_) << content;
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_, path_;
};

// Loads a scenario written inline.
inline Scenario scenario_from(const std::string& toml, const std::vector<std::string>& sets = {}) {
  TempFile f(toml);
  return load_scenario(f.path(), sets);
}

// The ConfigError loading `toml` with `sets` raises (fails the test when none).
inline ConfigError config_error_of(const std::string& toml, const std::vector<std::string>& sets = {}) {
  try {
    scenario_from(toml, sets);
  } catch (const ConfigError& e) {
    return e;
  }
  FAIL("expected a ConfigError");
  throw;  // unreachable
}

// A small GPT on one DGX A100 node; tests override what they exercise with --set.
inline std::string tiny_gpt(int nodes = 1) {
  return "[model]\npreset = \"tiny\"\n[training]\nglobal_batch_size = 8\nmicro_batch_size = 1\n"
         "[parallel]\ntensor = 1\npipeline = 1\n[cluster]\ntopology = \"dgx-a100\"\nnodes = " +
         std::to_string(nodes) + "\n";
}

}  // namespace paralab::test
