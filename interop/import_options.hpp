// paralab interop — what the user adds to a conversion: the hardware and the GPU count when
// the input does not say (or to override it), and the vocabulary size when no tokenizer hint
// gives it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace paralab::interop {

struct ImportOptions {
  std::string topology;               // a name in topologies/ or a .toml path; empty: dgx-h100
  std::optional<int64_t> gpus;        // all GPUs of the run (overrides the input's)
  std::optional<int64_t> nodes;       // nodes of the topology (overrides the input's)
  std::optional<int64_t> vocab_size;  // the tokenizer's vocabulary (overrides the input's)
  std::string name;                   // the scenario's name; empty: the input file's stem
  std::vector<std::string> sets;      // "section.key=value": set in the scenario after conversion
};

inline constexpr const char* kDefaultTopology = "dgx-h100";

}  // namespace paralab::interop
