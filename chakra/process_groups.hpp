// paralab — Chakra process groups. A collective node names its group in its "pg_name"
// attribute; the schema has no message for the membership, so it travels beside the traces
// in ASTRA-sim's communicator-group file (its --comm-group-configuration): a JSON object from
// group name to member ranks, {"1": [0, 1], "2": [0, 2]}. Names are positive integers, as
// ASTRA-sim parses them; "0" or no pg_name means every rank.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace paralab::chakra {

inline constexpr const char* kCommGroupFile = "comm_group.json";

class ProcessGroups {
 public:
  // The name of the group with these members (in this order), "1", "2", ... by first use.
  const std::string& name_of(const std::vector<int64_t>& members);
  [[nodiscard]] const std::map<std::string, std::vector<int64_t>>& groups() const { return groups_; }
  // The communicator-group file's text.
  [[nodiscard]] std::string json() const;

 private:
  std::map<std::vector<int64_t>, std::string> names_;
  std::map<std::string, std::vector<int64_t>> groups_;
};

// Reads a communicator-group file; a sim::replay::TraceError naming it when it is not one.
std::map<std::string, std::vector<int64_t>> read_comm_groups(const std::filesystem::path& file);

}  // namespace paralab::chakra
