// paralab tests — a comparison to draw: a TP2 x PP2 tiny GPT "predicted" on its stage
// representatives and "measured" on every rank, op durations from the op id, the measurement
// 0.7-1.4x the prediction depending on the op.
#pragma once

#include <array>
#include <string>

#include "analysis/validate/compare.hpp"
#include "analysis/validate/report.hpp"
#include "ir/step_ir.hpp"
#include "results/result_io.hpp"
#include "../ir/test_util.hpp"

namespace paralab::test {

struct ReportFixture {
  StepIR ir;
  LoadedResult predicted, measured;
  Comparison comparison;

  explicit ReportFixture(const std::string& schedule = "1f1b")
      : ir(build_step_ir(scenario_from(
            "[model]\npreset = \"tiny\"\nnum_layers = 4\n[training]\nglobal_batch_size = 4\nmicro_batch_size = 1\n"
            "[parallel]\ntensor = 2\npipeline = 2\nschedule = \"" + schedule +
            "\"\n[cluster]\ntopology = \"cpu-host\"\nnodes = 1\ndevices_per_node = 4\n"))) {
    predicted = round_trip(make(false), "p.json");
    measured = round_trip(make(true), "m.json");
    comparison = compare(predicted, measured, 10);
  }

  [[nodiscard]] std::string html() const {
    ReportInfo info;
    info.title = "paralab validate: report fixture";
    info.notes = {"synthetic results <for a test> & \"quotes\""};
    return html_report(predicted, measured, comparison, info);
  }

 private:
  StepResult make(bool measured_run) const {
    StepResult r;
    r.kind = measured_run ? "measured" : "predicted";
    for (int64_t rank = 0; rank < ir.layout.world(); ++rank) {
      if (!measured_run && rank != ir.layout.representative(ir.layout.stage_of(rank))) continue;
      const StepGraph& g = ir.graph_for(rank);
      std::array<double, kStreams> clock{};
      for (const Op& op : g.ops) {
        double& t = clock[static_cast<size_t>(op.stream)];
        const double base = 3.0 + static_cast<double>(op.id % 11) * 4.0;
        const double d = measured_run ? base * (0.7 + 0.07 * static_cast<double>(op.id % 10)) : base;
        r.ops.push_back({rank, op.id, t, t + d, t});
        t += d;
      }
      r.ranks.push_back({rank, g.stage, 1e8, 0, 0, {}});
    }
    finalize(r, ir);
    return r;
  }
  LoadedResult round_trip(const StepResult& r, const std::string& name) const {
    TempFile f(trace_json(r, ir), name);
    return read_result(f.path());
  }
};

}  // namespace paralab::test
