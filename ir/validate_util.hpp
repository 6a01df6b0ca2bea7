// paralab — helpers of the scenario validation (ir/validate*.cpp); internal to ir/.
#pragma once

#include <cstdint>
#include <string>

#include "ir/scenario.hpp"

namespace paralab {

// "1, 2, 4, ..." : the first `limit` divisors of n.
inline std::string divisors_of(int64_t n, int64_t limit = 16) {
  std::string out;
  int64_t shown = 0;
  for (int64_t d = 1; d <= n && shown < limit; ++d)
    if (n % d == 0) {
      out += (out.empty() ? "" : ", ") + std::to_string(d);
      ++shown;
    }
  if (shown == limit) out += ", ...";
  return out;
}

// Throws ConfigErrors located where the scenario set the key.
struct Checker {
  const Scenario& s;
  [[noreturn]] void fail(const std::string& key, const std::string& value, const std::string& problem,
                         const std::string& allowed) const {
    throw ConfigError(s.provenance.at(key), key, value, problem, allowed);
  }
  [[noreturn]] void fail(const std::string& key, int64_t value, const std::string& problem,
                         const std::string& allowed) const {
    fail(key, std::to_string(value), problem, allowed);
  }
  // `key`'s value must divide `what` (named `what_name`).
  void divides(const std::string& key, int64_t value, int64_t what, const std::string& what_name) const {
    if (what % value != 0)
      fail(key, value, "does not divide " + what_name + " (" + std::to_string(what) + ")",
           "a divisor of " + std::to_string(what) + ": " + divisors_of(what));
  }
};

// The layer split over pipeline stages (ir/validate_pipeline.cpp), part of
// validate_model_and_splits.
void validate_pipeline_split(const Scenario& s);

// Experts, router, MLA and expert parallelism (ir/validate_moe.cpp), part of validate_scenario.
void validate_moe(const Scenario& s);

}  // namespace paralab
