// paralab — StepResult on disk: the `--json` summary (field names fixed by DESIGN.md) and the
// `--trace` Chrome trace-event file (Perfetto opens it: a process per rank, a track per stream,
// each op an event named with its layer, micro-batch and phase). The trace also carries the
// summary under "otherData", so `paralab compare` can read traces or summaries.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "results/step_result.hpp"

namespace paralab {

nlohmann::json summary_json(const StepResult& r);
std::string trace_json(const StepResult& r, const StepIR& ir);

// Reads a summary (.json from --json) or a trace (from --trace). Per-op timings are only in
// traces; `has_ops` says whether the file had them. Throws std::runtime_error naming the file.
// What a trace says about an op besides its timing (enough to classify it without the IR).
struct OpMeta {
  std::string name, kind, phase, stream;
  int32_t layer = -1, microbatch = -1;
  std::string group, collective, role;  // communication group/kind; GEMM role
  int64_t m = 0, n = 0, k = 0, batch = 0;
  double flops = 0, bytes = 0;
};

struct LoadedResult {
  StepResult result;
  bool has_ops = false;
  std::vector<OpMeta> meta;  // parallel to result.ops when has_ops
  std::filesystem::path file;
};
LoadedResult read_result(const std::filesystem::path& file);
StepResult result_from_json(const nlohmann::json& summary);

}  // namespace paralab
