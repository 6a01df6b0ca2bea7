// paralab — which layers each pipeline stage (and each of its virtual chunks) holds.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/scenario.hpp"

namespace paralab {

struct ChunkSpec {
  int16_t chunk = 0;          // local index on the stage
  int64_t virtual_stage = 0;  // position in the whole pipeline: chunk * pp + stage
  int64_t first_layer = 0;
  int64_t num_layers = 0;
  bool embedding = false;     // first virtual stage: holds the embedding
  bool head = false;          // last virtual stage: final norm, output layer and loss
};

// Transformer layers of each virtual stage, in virtual-stage order (c*p + s). Megatron's
// assignment: with v chunks per stage, virtual stage c*p + s holds layers
// [(c p + s) L/(p v), (c p + s + 1) L/(p v)) (Narayanan et al. 2021, Sec. 2.2.2); with the
// embedding / loss counted, (L + 1 + 1)/(p v) each with one fewer on the first / last; uneven
// first/last stages take decoder_first/last_pipeline_num_layers and the rest split evenly; a
// pipeline_model_parallel_layout gives every stage's count. Assumes a validated scenario.
std::vector<int64_t> virtual_stage_layers(const Scenario& s);

// The chunks pipeline stage `stage` runs, layers numbered in virtual-stage order.
std::vector<ChunkSpec> stage_chunks(const Scenario& s, int64_t stage);

}  // namespace paralab
