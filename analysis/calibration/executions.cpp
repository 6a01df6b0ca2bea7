// paralab — the calibration's in-situ executions and the traces its earlier launches leave
// for the measuring job (in_situ_run.hpp).
#include "analysis/in_situ_run.hpp"

#include <algorithm>
#include <fstream>
#include <system_error>

#include "exec/execute.hpp"
#include "results/result_io.hpp"

namespace paralab::calib {

std::vector<StepResult> execute_in_situ(const StepIR& ir, exec::Transport& world, const std::string& backend,
                                        const InSituPlan& plan, const std::function<void(double, const std::string&)>& progress) {
  exec::ExecuteOptions eo;
  eo.backend = backend;
  eo.steps = InSituPlan::kStepsPerExecution;
  eo.measure_s = InSituPlan::kStepsS;
  eo.keep_steps = true;
  eo.warmup_s = InSituPlan::kWarmupS;
  const int most = plan.max_executions();
  std::vector<StepResult> runs;
  double measured_s = 0, units = 0;
  for (int run = 0; run < most; ++run) {
    exec::ExecuteOutcome out = exec::execute(ir, world, eo);
    int64_t more = 0;
    if (world.rank() == 0) {
      for (StepResult& step : out.steps) {
        measured_s += step.step_time_s;
        runs.push_back(std::move(step));
      }
      more = measured_s < plan.measured_s() && run + 1 < most;
    }
    world.all_reduce(&more, 1, ReduceOp::max);  // rank 0 decides for everyone
    const double add = more ? 4.0 / most : 4.0 - units;
    units += add;
    if (progress) progress(add, "execution, " + ir.scenario.name);
    if (!more) break;
  }
  return runs;
}

void write_in_situ_traces(const std::filesystem::path& dir, size_t index, const StepIR& ir, const std::vector<StepResult>& runs) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("calibrate: cannot create " + dir.string() + ": " + ec.message());
  for (size_t r = 0; r < runs.size(); ++r) {
    const std::filesystem::path p = dir / ("s" + std::to_string(index) + "-r" + std::to_string(r) + ".json");
    std::ofstream f(p);
    f << trace_json(runs[r], ir);
    f.close();
    if (!f) throw std::runtime_error("calibrate: cannot write " + p.string());
  }
}

InSituTraces read_in_situ_traces(const std::filesystem::path& root, size_t index, const StepIR& ir) {
  const std::string prefix = "s" + std::to_string(index) + "-r";
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec); !ec && it != std::filesystem::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string stem = it->path().stem().string();
    const bool numbered = stem.size() > prefix.size() && stem.rfind(prefix, 0) == 0 &&
                          stem.find_first_not_of("0123456789", prefix.size()) == std::string::npos;
    if (it->is_regular_file() && numbered && it->path().extension() == ".json") files.push_back(it->path());
  }
  if (ec) throw std::runtime_error("calibrate: cannot read the in-situ traces under " + root.string() + ": " + ec.message());
  // Launch directories in name order (calibrate numbers them with two digits), runs in number
  // order (r10 after r9).
  std::sort(files.begin(), files.end(), [&](const std::filesystem::path& a, const std::filesystem::path& b) {
    if (a.parent_path() != b.parent_path()) return a.parent_path() < b.parent_path();
    const auto run = [&](const std::filesystem::path& p) { return std::stol(p.stem().string().substr(prefix.size())); };
    return run(a) < run(b);
  });
  InSituTraces out;
  const std::string digest = scenario_digest(ir.scenario);
  std::filesystem::path last;
  for (const auto& f : files) {
    LoadedResult r = read_result(f);
    if (!r.has_ops) throw std::runtime_error(f.string() + ": an in-situ trace without per-op timings");
    if (r.result.scenario_digest != digest)
      throw std::runtime_error(f.string() + ": an in-situ trace of scenario '" + r.result.scenario + "' (digest " +
                               r.result.scenario_digest + "), not of '" + ir.scenario.name + "' (digest " + digest + ")");
    if (f.parent_path() != last) ++out.launches;
    last = f.parent_path();
    out.runs.push_back(std::move(r.result));
  }
  return out;
}

}  // namespace paralab::calib
