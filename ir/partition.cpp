// paralab — layer partition over pipeline stages and virtual chunks.
#include "ir/partition.hpp"

namespace paralab {

std::vector<ChunkSpec> stage_chunks(const Scenario& s, int64_t stage) {
  const int64_t p = s.parallel.pipeline;
  const int64_t v = s.parallel.virtual_pipeline_stages;
  const int64_t L = s.model.num_layers;
  std::vector<ChunkSpec> out;
  const int64_t first = s.parallel.decoder_first_pipeline_num_layers;
  const int64_t last = s.parallel.decoder_last_pipeline_num_layers;
  if (first > 0 || last > 0) {
    // Uneven: stage 0 and/or stage p-1 fixed, the middle stages share the rest evenly.
    const int64_t fixed = (first > 0) + (last > 0);
    const int64_t middle = (L - first - last) / (p - fixed);
    auto layers_of = [&](int64_t st) {
      if (st == 0 && first > 0) return first;
      if (st == p - 1 && last > 0) return last;
      return middle;
    };
    int64_t begin = 0;
    for (int64_t st = 0; st < stage; ++st) begin += layers_of(st);
    out.push_back({0, stage, begin, layers_of(stage), stage == 0, stage == p - 1});
    return out;
  }
  const int64_t per_chunk = L / (p * v);
  for (int64_t c = 0; c < v; ++c) {
    const int64_t vs = c * p + stage;
    out.push_back({static_cast<int16_t>(c), vs, vs * per_chunk, per_chunk, vs == 0, vs == p * v - 1});
  }
  return out;
}

}  // namespace paralab
