// paralab tests — helpers for the importers: the test data folder, loading a converted draft
// through the scenario loader, and finding skipped items.
#pragma once

#include <string>

#include "interop/draft.hpp"
#include "tests/ir/test_util.hpp"

namespace paralab::test {

inline std::string import_data(const std::string& name) { return std::string(PARALAB_SOURCE_DIR) + "/tests/data/import/" + name; }

// The draft's TOML as paralab loads it.
inline Scenario load_draft(const interop::ScenarioDraft& d) {
  TempFile f(d.toml());
  return load_scenario(f.path());
}

// The skipped item named `name`, or nullptr.
inline const interop::Skipped* skipped(const interop::ScenarioDraft& d, const std::string& name) {
  for (const interop::Skipped& s : d.skipped())
    if (s.item.name == name) return &s;
  return nullptr;
}

}  // namespace paralab::test
