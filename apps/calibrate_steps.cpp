// paralab calibrate --from-step-time (calibrate_steps.hpp).
#include "apps/calibrate_steps.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "analysis/calibration/step_time_fit.hpp"
#include "apps/run_list.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/topology_format.hpp"

namespace paralab::cli {

namespace {

void print_fit(const calib::StepTimeFit& f, const std::vector<calib::StepTimeRun>& runs, const std::string& out) {
  for (const calib::StepTimeTerm& t : f.terms) {
    if (t.why_not.empty())
      std::printf("fitted      %-14s %s = %.4g%s   (%s)%s\n", t.name.c_str(), t.factor ? "factor" : "fixed", t.value,
                  t.factor ? "" : " us", t.cls.label().c_str(),
                  t.at_bound ? "  at its bound: the runs ask for more than this term can give" : "");
    else std::printf("not fitted  %-14s %s\n", t.name.c_str(), t.why_not.c_str());
  }
  std::printf("%-32s %12s %12s %8s %12s %8s\n", "run", "measured s", "before s", "error", "after s", "error");
  for (size_t i = 0; i < runs.size(); ++i) {
    const double m = runs[i].measured_s;
    std::printf("%-32s %12.5g %12.5g %+7.1f%% %12.5g %+7.1f%%\n", runs[i].label.c_str(), m, f.before_s[i],
                100 * (f.before_s[i] - m) / m, f.after_s[i], 100 * (f.after_s[i] - m) / m);
  }
  std::printf("use it      --set cluster.topology=%s\n", out.c_str());
}

nlohmann::json fit_json(const calib::StepTimeFit& f, const std::vector<calib::StepTimeRun>& runs, const std::string& out) {
  nlohmann::json j;
  j["out"] = out;
  j["iterations"] = f.iterations;
  j["terms"] = nlohmann::json::array();
  for (const calib::StepTimeTerm& t : f.terms)
    j["terms"].push_back({{"name", t.name}, {"class", t.cls.label()}, {"fitted", t.why_not.empty()},
                          {t.factor ? "factor" : "fixed_us", t.value}, {"at_bound", t.at_bound}, {"why_not", t.why_not}});
  j["runs"] = nlohmann::json::array();
  for (size_t i = 0; i < runs.size(); ++i)
    j["runs"].push_back({{"label", runs[i].label}, {"measured_s", runs[i].measured_s}, {"before_s", f.before_s[i]},
                         {"after_s", f.after_s[i]}});
  return j;
}

}  // namespace

int run_calibrate_from_step_time(const Args& a, const std::string& runs_file, const std::string& out) {
  const auto entries = read_run_list(runs_file, "run");
  if (!entries || entries->empty())
    throw UsageError("--from-step-time " + runs_file + ": no [[run]] entries (each: scenario, step_time_s, optional set, label)");
  std::vector<calib::StepTimeRun> runs;
  for (const RunEntry& e : *entries) {
    std::vector<std::string> sets = e.sets;
    sets.insert(sets.end(), a.sets.begin(), a.sets.end());
    runs.push_back({e.label, load_scenario(e.scenario, sets), e.step_time_s});
  }
  const calib::StepTimeFit fit = calib::fit_step_times(runs);
  Topology t = runs[0].scenario.topology;
  t.calibration.corrections = fit.table;
  if (t.calibration.schema_version == 0) t.calibration.schema_version = kCalibrationSchema;
  std::string labels;
  for (const auto& r : runs) labels += (labels.empty() ? "" : ", ") + r.label;
  t.calibration.source = "step times of " + std::to_string(runs.size()) + " run" + (runs.size() == 1 ? "" : "s") + " (" + runs_file + ")";
  std::string header = t.name + ": written by `paralab calibrate --from-step-time " + runs_file + "` (docs/calibration.md).\n";
  header += "Corrections fitted to the measured step times of: " + labels + ".\n";
  for (const calib::StepTimeTerm& term : fit.terms)
    if (!term.why_not.empty()) header += "Not fitted, " + term.name + ": " + term.why_not + ".\n";
  header += "Based on topology '" + runs[0].scenario.topology.name + "'; its other values are unchanged.";
  TopologyNotes notes;
  for (size_t i = 0; i < fit.table.rows().size(); ++i)
    notes["calibration.correction#" + std::to_string(i)] = fit.table.rows()[i].cls.label();
  std::ofstream f(out);
  f << topology_toml(t, header, notes);
  if (!f) throw UsageError("--out " + out + ": could not write the topology");
  if (a.flag("--json")) std::printf("%s\n", fit_json(fit, runs, out).dump(2).c_str());
  else print_fit(fit, runs, out);
  return 0;
}

}  // namespace paralab::cli
