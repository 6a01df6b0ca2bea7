// paralab — the HTML report of a comparison (`validate --report`, `compare --report`): one
// self-contained page (inline CSS, JavaScript and SVG; nothing downloaded) with
//   - the headline figures (step time predicted and measured, error, per-op MAPE),
//   - the predicted and the measured timelines side by side, a lane per rank and stream, on
//     one time scale, each op a bar coloured by its kind (hover: name, duration),
//   - predicted against measured duration per op, log-log, coloured by op kind, with the
//     y = x line and a +-10 % band,
//   - the error by op class.
// After drawing, the page's script records what it drew on the chart elements
// (`data-drawn` = elements drawn, `data-expected` = elements it should draw) and sets
// `data-report-ready="1"` on <html>, so a headless browser's DOM dump shows whether the charts
// rendered (tests/analysis/test_report.cpp).
#pragma once

#include <string>

#include "analysis/validate/compare.hpp"
#include "results/result_io.hpp"

namespace paralab {

struct ReportInfo {
  std::string title;               // e.g. "paralab validate: quickstart"
  std::vector<std::string> notes;  // lines under the title (calibration, command, ...)
};

std::string html_report(const LoadedResult& predicted, const LoadedResult& measured, const Comparison& c,
                        const ReportInfo& info);

// The op-kind family a trace op is drawn in ("gemm", "attention", "norm", "elementwise",
// "loss", "optimizer", "collective tp", "p2p pp", ...).
std::string report_family(const OpMeta& m);

// The pipeline pass a trace op belongs to, for the schedule view: "F forward", "B input
// gradient" ("B+W backward" when the run's backward is not split), "W weight gradient",
// "R recompute", "optimizer", or "communication" (any op off the compute stream).
std::string report_pass(const OpMeta& m, bool split_backward);

}  // namespace paralab
