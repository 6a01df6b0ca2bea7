// paralab — layer partition over pipeline stages and virtual chunks.
#include "ir/partition.hpp"

namespace paralab {

std::vector<int64_t> virtual_stage_layers(const Scenario& s) {
  const ParallelConfig& par = s.parallel;
  const int64_t p = par.pipeline, v = par.virtual_pipeline_stages, L = s.model.num_layers;
  std::vector<int64_t> out(static_cast<size_t>(p * v), 0);
  if (!par.pipeline_layout.empty()) {
    for (size_t i = 0; i < out.size() && i < par.pipeline_layout.size(); ++i) out[i] = par.pipeline_layout[i].decoder;
    return out;
  }
  const int64_t first = par.decoder_first_pipeline_num_layers, last = par.decoder_last_pipeline_num_layers;
  if (first > 0 || last > 0) {
    // Uneven (v = 1): stage 0 and/or stage p-1 fixed, the middle stages share the rest evenly.
    const int64_t fixed = (first > 0) + (last > 0);
    const int64_t middle = p > fixed ? (L - first - last) / (p - fixed) : 0;
    for (int64_t st = 0; st < p; ++st) out[static_cast<size_t>(st)] = middle;
    if (first > 0) out.front() = first;
    if (last > 0) out.back() = last;
    return out;
  }
  // Even, with the embedding and/or loss counted as layers (Megatron-LM's
  // get_transformer_layer_offset / get_num_layers_to_build).
  const int64_t e = par.account_for_embedding_in_pipeline_split ? 1 : 0;
  const int64_t l = par.account_for_loss_in_pipeline_split ? 1 : 0;
  const int64_t per = (L + e + l) / (p * v);
  for (auto& n : out) n = per;
  out.front() -= e;
  out.back() -= l;
  return out;
}

std::vector<ChunkSpec> stage_chunks(const Scenario& s, int64_t stage) {
  const int64_t p = s.parallel.pipeline;
  const int64_t v = s.parallel.virtual_pipeline_stages;
  const std::vector<int64_t> layers = virtual_stage_layers(s);
  std::vector<ChunkSpec> out;
  for (int64_t c = 0; c < v; ++c) {
    const int64_t vs = c * p + stage;
    int64_t begin = 0;
    for (int64_t k = 0; k < vs; ++k) begin += layers[static_cast<size_t>(k)];
    out.push_back({static_cast<int16_t>(c), vs, begin, layers[static_cast<size_t>(vs)], vs == 0, vs == p * v - 1});
  }
  return out;
}

}  // namespace paralab
