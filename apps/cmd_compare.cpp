// paralab compare — the error of a prediction against a measurement of the same scenario.
#include <cstdio>

#include "analysis/validate/compare.hpp"
#include "analysis/validate/report.hpp"
#include "apps/cli.hpp"
#include "apps/commands.hpp"

namespace paralab::cli {

namespace {
const std::vector<OptionSpec> kOptions = {
    {"--top", true, "how many of the largest per-op errors to list (default 10)"},
    {"--report", true, "write an HTML report (timelines side by side, per-op scatter) to FILE (needs traces)"},
    {"--help", false, "this help"},
};
}  // namespace

int run_compare(int argc, char** argv) {
  const Args a = parse(argc, argv, 1, kOptions);
  if (a.flag("--help")) {
    std::printf("usage: paralab compare PREDICTED MEASURED [options]\n"
                "  PREDICTED, MEASURED: traces (--trace) or summaries (--json) of simulate/execute\n%s",
                options_help(kOptions).c_str());
    return 0;
  }
  if (!a.sets.empty()) throw UsageError("compare reads results; --set does not apply");
  check_outputs(a, {"--report"});
  size_t top = 10;
  if (auto t = a.value("--top")) {
    try {
      top = static_cast<size_t>(std::stoul(*t));
    } catch (const std::exception&) {
      throw UsageError("--top needs a count, got '" + *t + "'");
    }
  }
  const std::string pf = a.require_positional(0, "PREDICTED"), mf = a.require_positional(1, "MEASURED");
  // The two files are the user's: one that cannot be read, or two that do not belong together,
  // is bad input (exit code 2), as a bad scenario key is.
  LoadedResult p, m;
  Comparison c;
  try {
    p = read_result(pf);
    m = read_result(mf);
    c = compare(p, m, top);
  } catch (const std::runtime_error& e) {
    throw InputError(e.what());
  }
  if (auto r = a.value("--report")) {
    if (!c.per_op) throw UsageError("--report needs traces (--trace) of both runs, not summaries");
    ReportInfo info;
    info.title = "paralab compare: " + c.scenario;
    info.notes = {"predicted: " + p.file.string() + " (" + p.result.backend + ", " + p.result.topology + ")",
                  "measured: " + m.file.string() + " (" + m.result.backend + ", " + m.result.topology + ")"};
    write_file_atomic(*r, html_report(p, m, c, info));
  }
  if (a.flag("--json")) std::printf("%s\n", to_json(c).dump(2).c_str());
  else std::printf("%s", to_table(c).c_str());
  return 0;
}

}  // namespace paralab::cli
