// paralab bench/host — what the host probes (host_steadiness.cpp, cross_core.cpp) share: their
// numeric options, the CPUs they may pin threads to, and the nearest-rank quantile they print.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "exec/core_turns.hpp"

namespace paralab::bench::host {

// Parses `--name value` pairs into the doubles named in `options`; every value must be a number
// > 0. False on an unknown option, a missing value or a bad one (the caller prints its usage).
inline bool parse_options(int argc, char** argv, const std::vector<std::pair<std::string, double*>>& options) {
  for (int i = 1; i < argc; ++i) {
    double* target = nullptr;
    for (const auto& [name, ptr] : options)
      if (name == argv[i]) target = ptr;
    if (!target || i + 1 >= argc) return false;
    char* end = nullptr;
    const double v = std::strtod(argv[i + 1], &end);
    if (end == argv[i + 1] || *end != '\0' || !(v > 0)) return false;
    *target = v;
    ++i;
  }
  return true;
}

// The CPUs this process may use, in order, as the executor counts them (exec::affinity_mask).
inline std::vector<int> allowed_cpus() {
  const exec::CpuMask allowed = exec::affinity_mask();
  std::vector<int> cpus;
  for (int c = 0; c < static_cast<int>(allowed.size() * 64); ++c)
    if ((allowed[static_cast<size_t>(c / 64)] >> (c % 64)) & 1u) cpus.push_back(c);
  return cpus;
}

// Nearest rank, not calib::quantile's interpolation: every rate printed is one window's.
inline double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

}  // namespace paralab::bench::host
