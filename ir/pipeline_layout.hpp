// paralab — Megatron-LM's pipeline_model_parallel_layout: which layers each virtual pipeline
// stage holds, written as one string (megatron/core/transformer/pipeline_parallel_layer_layout.py).
// Stages are separated by '|' in virtual-stage order (chunk-major: virtual stage c*p + s is
// chunk c of pipeline rank s); each holds 'E' (embedding), 't' (a transformer layer), 'm' (a
// multi-token-prediction layer) and 'L' (loss). "x*n" repeats one character, "(...)*n" a group,
// commas are cosmetic: "Et*3|(tt|)*29,m|L".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/error.hpp"

namespace paralab {

struct VirtualStageLayers {
  int64_t decoder = 0;  // 't'
  int64_t mtp = 0;      // 'm'
  int64_t embedding = 0, loss = 0;  // 'E', 'L' (counted, so that validation can say "twice")
  bool embedding_first = false;     // 'E' is the stage's first entry
  bool loss_last = false;           // 'L' is the stage's last entry
};

// Parses and expands a layout string; throws ConfigError (at `at`, key `key`) on a character
// other than E t m L | , ( ) * digits, an unbalanced group or a repeat without a count.
std::vector<VirtualStageLayers> parse_pipeline_layout(const std::string& text, const SourceLoc& at,
                                                      const std::string& key);

}  // namespace paralab
