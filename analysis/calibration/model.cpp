// paralab — from the calibration's measurements to its model (calibrate.hpp, fit_all and
// calibrated_topology): the hardware fits, then each executed scenario simulated on that
// hardware with no corrections and compared op by op with its steps (samples.hpp), and the
// correction table fitted to every scenario's samples together (corrections.hpp).
#include <algorithm>

#include "analysis/calibration/calibrate.hpp"
#include "analysis/calibration/corrections.hpp"
#include "analysis/calibration/samples.hpp"
#include "analysis/stats.hpp"
#include "ir/scenario_loader.hpp"
#include "sim/compute/compute_model.hpp"
#include "sim/simulate.hpp"

namespace paralab::calib {

void fit_all(CalibrationResult& r) {
  fit_hardware(r);
  r.corrections.clear();
  if (r.executions.empty()) return;
  const Topology hw = calibrated_hardware(r);
  CorrectionSamples all;
  for (const ScenarioExecution& e : r.executions) {
    if (e.steps.empty()) continue;
    Scenario s = load_scenario(e.file, r.sets);
    s.topology = hw;  // the calibrated hardware, its measured op times, no corrections
    const StepIR ir = build_step_ir(s);
    const sim::Simulation sim = sim::simulate(ir);
    const sim::ComputeModel model(hw);
    std::vector<std::vector<double>> modeled;
    for (const StepGraph& g : ir.stages) modeled.push_back(model.durations(g));
    all.append(correction_samples(ir, e.steps, sim.result, modeled));
  }
  r.corrections = fit_corrections(all);
}

Topology calibrated_topology(const CalibrationResult& r) {
  Topology t = calibrated_hardware(r);
  t.calibration.corrections = CorrectionTable(r.corrections);
  for (const ScenarioExecution& e : r.executions) {
    if (e.steps.empty()) continue;
    std::vector<double> s;
    for (const StepResult& x : e.steps) s.push_back(x.step_time_s);
    const auto [lo, hi] = std::minmax_element(s.begin(), s.end());
    t.calibration.executions.push_back({e.name, e.digest, static_cast<int64_t>(s.size()), median(s), *lo, *hi});
  }
  return t;
}

}  // namespace paralab::calib
