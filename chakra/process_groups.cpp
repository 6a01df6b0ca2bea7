// paralab — process group names and ASTRA-sim's communicator-group file (process_groups.hpp).
#include "chakra/process_groups.hpp"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/replay/trace.hpp"

namespace paralab::chakra {

const std::string& ProcessGroups::name_of(const std::vector<int64_t>& members) {
  auto it = names_.find(members);
  if (it != names_.end()) return it->second;
  const std::string name = std::to_string(names_.size() + 1);
  groups_.emplace(name, members);
  return names_.emplace(members, name).first->second;
}

std::string ProcessGroups::json() const {
  // In numeric order of the names (a std::map orders "10" before "2").
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (size_t i = 1; i <= groups_.size(); ++i) {
    const std::string name = std::to_string(i);
    j[name] = groups_.at(name);
  }
  return j.dump() + "\n";
}

std::map<std::string, std::vector<int64_t>> read_comm_groups(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw sim::replay::TraceError(file.string(), std::nullopt, "cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  std::map<std::string, std::vector<int64_t>> out;
  try {
    const nlohmann::json j = nlohmann::json::parse(text.str());
    if (!j.is_object()) throw sim::replay::TraceError(file.string(), std::nullopt, "expected an object {\"name\": [ranks]}");
    for (const auto& [name, members] : j.items()) out[name] = members.get<std::vector<int64_t>>();
  } catch (const nlohmann::json::exception& e) {
    throw sim::replay::TraceError(file.string(), std::nullopt,
                                  std::string("not a communicator-group file {\"name\": [ranks]}: ") + e.what());
  }
  return out;
}

}  // namespace paralab::chakra
