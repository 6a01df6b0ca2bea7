// paralab — run-list files (run_list.hpp).
#include "apps/run_list.hpp"

#include <filesystem>
#include <sstream>

#include "ir/error.hpp"
#include "ir/raw_config.hpp"
#include "ir/schema.hpp"

namespace paralab::cli {

namespace {

// `set = "cluster.nodes=64; training.global_batch_size=1536"`: overrides, ';'-separated.
std::vector<std::string> split_sets(const RawValue& v, const std::string& key) {
  std::vector<std::string> out;
  std::stringstream ss(read_string(v, key));
  for (std::string item; std::getline(ss, item, ';');) {
    const auto b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b == std::string::npos) continue;
    item = item.substr(b, e - b + 1);
    if (item.find('=') == std::string::npos)
      throw ConfigError(v.loc, key, v.text, "each override must be section.key=value", "\"a.b=1; c.d=2\"");
    out.push_back(item);
  }
  return out;
}

}  // namespace

std::optional<std::vector<RunEntry>> read_run_list(const std::string& file, const std::string& array) {
  const RawFile raw = read_toml_file(file);
  auto it = raw.arrays.find(array);
  if (it == raw.arrays.end()) return std::nullopt;
  const bool runs = array == "run";
  const std::string keys = runs ? "scenario, step_time_s, set, label" : "scenario, set, label";
  if (!raw.values.empty())
    throw ConfigError(raw.values.begin()->second.loc, raw.values.begin()->first, raw.values.begin()->second.text,
                      "a " + array + " file holds [[" + array + "]] entries only", "[[" + array + "]] with " + keys);
  const std::filesystem::path dir = std::filesystem::path(file).parent_path();
  std::vector<RunEntry> out;
  for (const RawTable& e : it->second) {
    RunEntry s;
    bool timed = false;
    for (const auto& [k, v] : e) {
      const std::string key = array + "." + k;
      if (k == "scenario") s.scenario = (dir / read_string(v, key)).string();
      else if (k == "label") s.label = read_string(v, key);
      else if (k == "set") s.sets = split_sets(v, key);
      else if (runs && k == "step_time_s") {
        s.step_time_s = read_double(v, key, 0, 1e9, /*min_exclusive=*/true);
        timed = true;
      } else throw ConfigError(v.loc, key, v.text, "unknown key", keys);
    }
    const SourceLoc at{file, e.empty() ? 0 : e.begin()->second.loc.line, 0};
    if (s.scenario.empty())
      throw ConfigError(at, array + ".scenario", "", "required key is missing", "a scenario file, relative to this file");
    if (runs && !timed)
      throw ConfigError(at, "run.step_time_s", "", "required key is missing", "the measured step time in seconds, > 0");
    if (s.label.empty())
      s.label = std::filesystem::path(s.scenario).stem().string() + (s.sets.empty() ? "" : " (" + std::to_string(out.size() + 1) + ")");
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace paralab::cli
