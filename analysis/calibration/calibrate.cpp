// paralab — the calibration job: measurements on every rank, pooled and fitted on rank 0
// (calibrate.hpp; docs/calibration.md).
#include "analysis/calibration/calibrate.hpp"

#include <chrono>
#include <ctime>
#include <deque>

#include "analysis/calibration/executions.hpp"
#include "analysis/calibration/jobs.hpp"
#include "analysis/temp_dir.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/topology_loader.hpp"

namespace paralab::calib {

namespace {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

CalibrationResult run_calibration(exec::Transport& world, const CalibrateOptions& opts) {
  const auto t_start = std::chrono::steady_clock::now();
  const int rank = world.rank(), N = world.size();
  CalibrationResult res;
  res.backend = opts.backend;
  res.ranks = N;
  res.reps = opts.reps;
  res.sets = opts.sets;
  res.started_utc = utc_now();
  res.host = host_info(world.node_cores());
  // With more ranks than cores a replayed op's wall time holds the others' use of its core,
  // which the simulator shares out itself (sim/engine/core_share.hpp): time its work instead.
  res.compute_cpu_time = opts.backend == "cpu" && N > res.host.cores;

  // The scenarios: those of the job's size are executed (4.), the others replayed (1.).
  std::deque<StepIR> irs;
  std::vector<detail::ReplayJob> jobs;
  std::vector<std::pair<std::filesystem::path, const StepIR*>> executed;
  std::vector<const StepIR*> scenario_irs;
  for (const auto& file : opts.scenarios) {
    const Scenario s = load_scenario(file, opts.sets);
    irs.push_back(build_step_ir(s));
    const StepIR& ir = irs.back();
    res.scenarios.push_back(s.name);
    scenario_irs.push_back(&ir);
    if (opts.execute && executes_in_job(ir.layout.world(), N)) executed.emplace_back(file, &ir);
    else jobs.push_back({&ir, rank % ir.layout.world(), "scenario " + s.name});
  }
  std::filesystem::path base_file = opts.base_topology;
  if (base_file.empty())
    base_file = irs.empty() ? resolve_topology("cpu-host", ".", SourceLoc{}, "topology") : irs.front().scenario.topology.file;
  res.base = load_topology(base_file);

  TempDir tmp("paralab-calibrate");
  if (opts.sweep) {
    const std::vector<detail::ReplayJob> sweep = detail::sweep_jobs(opts.quick, base_file, tmp.path(), irs);
    jobs.insert(jobs.end(), sweep.begin(), sweep.end());
  }
  const detail::ScenarioCalls calls = detail::scenario_calls(scenario_irs);
  const double units_total = static_cast<double>(jobs.size() * static_cast<size_t>(opts.reps + 1)) +
                             detail::comm_sweep_units(N, opts, calls) + 1.0 + 4.0 * static_cast<double>(executed.size());
  double units = 0;
  auto progress = [&](double add, const std::string& what) {
    units += add;
    if (rank == 0 && opts.progress) opts.progress(std::min(1.0, units / units_total), what);
  };

  std::map<OpKey, OpSamples> compute;
  detail::replay_compute(jobs, world, opts, res.compute_cpu_time, compute, res.gpu, progress);
  const std::vector<CommPoint> comm = detail::comm_sweep(world, opts, res.base, base_file, tmp.path(), calls, res.gpu, progress);
  const double copy = opts.backend == "cpu" ? detail::copy_bandwidth_gbps(world) : 0.0;
  progress(1.0, "memory bandwidth");

  for (const auto& [file, ir] : executed) {
    ScenarioExecution e{file, ir->scenario.name, scenario_digest(ir->scenario), execute_steps(*ir, world, opts.backend)};
    progress(4.0, "execution, " + e.name);
    if (rank == 0) res.executions.push_back(std::move(e));
  }
  detail::pool_samples(world, compute, comm, copy, calls, res);
  if (rank != 0) return res;

  // An executed op's key takes its times in the step (beside its rank's communication and the
  // other ranks, as `execute` runs it), not its replay's.
  std::map<OpKey, OpSamples> in_step;
  for (const ScenarioExecution& e : res.executions) {
    const StepIR& ir = *std::find_if(executed.begin(), executed.end(), [&](const auto& x) { return x.first == e.file; })->second;
    for (const StepResult& step : e.steps)
      for (const OpTiming& t : step.ops) {
        const Op& op = ir.graph_for(t.rank).op(t.op);
        if (is_comm(op.kind) || t.end_us <= t.start_us) continue;
        OpSamples& s = in_step[op_key(op)];
        if (s.us.empty()) s = OpSamples{op_key(op), op.flops, op.bytes, op.flops * (op.attention() && op.attention()->causal ? 0.5 : 1.0),
                                        "execution " + e.name, {}};
        s.us.push_back(t.end_us - t.start_us);
      }
  }
  for (OpSamples& s : res.compute) {
    auto it = in_step.find(s.key);
    if (it == in_step.end()) continue;
    s = std::move(it->second);
    in_step.erase(it);
  }
  for (auto& [k, s] : in_step) res.compute.push_back(std::move(s));

  res.paralab_version = paralab_version();
  fit_all(res);
  res.host.loadavg_end = loadavg();
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  return res;
}

}  // namespace paralab::calib
