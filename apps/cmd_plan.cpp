// paralab plan — every valid layout of the scenario's model on its cluster, simulated and
// ranked. Keys the scenario sets in [parallel] (and micro_batch_size, recompute) are pinned.
// A sweep file ([[sweep]] entries) plans several scenarios or clusters in one job; under
// mpirun the ranks share the simulations and rank 0 prints what one process prints.
#include <chrono>
#include <filesystem>
#include <optional>
#include <cstdio>
#include <memory>
#include <sstream>
#include <unistd.h>

#include "analysis/launch.hpp"
#include "apps/cli.hpp"
#include "apps/commands.hpp"
#include "apps/plan_mpi.hpp"
#include "apps/run_list.hpp"
#include "ir/enum_names.hpp"
#include "ir/raw_config.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/schema.hpp"
#include "ir/summary_json.hpp"
#include "plan/planner.hpp"
#include "results/result_io.hpp"
#if defined(PARALAB_EXEC_MPI)
#include "exec/mpi/mpi_transport.hpp"
#endif

namespace paralab::cli {

namespace {

const std::vector<OptionSpec> kOptions = {
    {"--top", true, "layouts to show (and re-simulate exactly), default 10"},
    {"--csv", true, "write every simulated candidate to FILE"},
    {"--threads", true, "simulation threads (default: every core)"},
    {"--baseline", true, "a layout to compare the winner with, e.g. tensor=8,pipeline=12,data=16"},
    {"--max-tensor", true, "largest tensor-parallel size (default: devices per node)"},
    {"--max-micro-batch", true, "largest micro-batch size (default 8)"},
    {"--min-context-tokens", true, "least tokens per context-parallel rank (default 2048)"},
    {"--max-virtual-stages", true, "most virtual pipeline stages per stage (default 8)"},
    {"--schedules", true, "comma-separated pipeline schedules to search (default all: gpipe,1f1b,interleaved,zb-h1,zb-h2)"},
    {"--refine", true, "best screened layouts to re-simulate with two runs (default 16)"},
    {"--no-prune", false, "simulate every layout that fits, without the lower bound's pruning (docs/planner.md)"},
    {"--exact", false, "simulate every micro-batch of every candidate (slower; default screens, see docs/planner.md)"},
    {"--help", false, "this help"},
};

int64_t to_int(const std::string& opt, const std::string& v) {
  try {
    size_t used = 0;
    const long long x = std::stoll(v, &used);
    if (used != v.size() || x < 0) throw std::invalid_argument("");
    return x;
  } catch (const std::exception&) {
    throw UsageError(opt + " needs a non-negative integer, got '" + v + "'");
  }
}

// "1f1b,zb-h1" -> the schedules; an unknown name is refused with the allowed ones.
std::vector<Schedule> schedule_list(const std::string& v) {
  std::vector<Schedule> out;
  std::stringstream in(v);
  for (std::string name; std::getline(in, name, ',');) {
    const auto s = enum_from_string<Schedule>(name);
    if (!s) {
      std::string allowed;
      for (const auto& [n, e] : names<Schedule>()) allowed += (allowed.empty() ? "" : ", ") + std::string(n);
      throw UsageError("--schedules: unknown schedule '" + name + "' (allowed: " + allowed + ")");
    }
    out.push_back(*s);
  }
  if (out.empty()) throw UsageError("--schedules needs at least one schedule");
  return out;
}

Candidate parse_baseline(const std::string& text, const Scenario& base) {
  Candidate c;
  c.micro_batch = base.training.micro_batch_size;
  c.zero_stage = base.parallel.zero_stage;
  c.recompute = base.training.recompute;
  c.sequence_parallel = base.parallel.sequence_parallel;
  c.data = 0;
  bool schedule_given = false;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) throw UsageError("--baseline wants key=value pairs, got '" + item + "'");
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    if (k == "tensor") c.tensor = to_int(k, v);
    else if (k == "pipeline") c.pipeline = to_int(k, v);
    else if (k == "context") c.context = to_int(k, v);
    else if (k == "data") c.data = to_int(k, v);
    else if (k == "virtual_pipeline_stages") c.virtual_stages = to_int(k, v);
    else if (k == "micro_batch_size") c.micro_batch = to_int(k, v);
    else if (k == "zero_stage") c.zero_stage = to_int(k, v);
    else if (k == "sequence_parallel") c.sequence_parallel = v == "true" || v == "1";
    else if (k == "account_for_embedding_and_loss") c.count_ends = v == "true" || v == "1";
    else if (k == "microbatch_group_size_per_vp_stage") c.microbatch_group = to_int(k, v);
    else if (k == "recompute" && enum_from_string<Recompute>(v)) c.recompute = *enum_from_string<Recompute>(v);
    else if (k == "schedule" && enum_from_string<Schedule>(v)) {
      c.schedule = *enum_from_string<Schedule>(v);
      schedule_given = true;
    } else
      throw UsageError("--baseline: unknown key or value '" + item +
                       "' (keys: tensor, pipeline, context, data, virtual_pipeline_stages, schedule, micro_batch_size, "
                       "zero_stage, recompute, sequence_parallel, account_for_embedding_and_loss, microbatch_group_size_per_vp_stage)");
  }
  if (!schedule_given && c.virtual_stages > 1) c.schedule = Schedule::interleaved;
  if (c.data == 0) c.data = base.cluster.devices() / std::max<int64_t>(1, c.tensor * c.pipeline * c.context);
  return c;
}

nlohmann::json layout_entry(const PlannedLayout& l, size_t rank) {
  nlohmann::json j = summary_json(l.result);
  for (const char* k : {"ranks", "sim_wall_s", "wall_s"}) j.erase(k);  // deterministic output
  const Candidate& c = l.candidate;
  j["rank"] = rank;
  j["layout"] = {{"tensor", c.tensor},
                 {"pipeline", c.pipeline},
                 {"context", c.context},
                 {"data", c.data},
                 {"virtual_pipeline_stages", c.virtual_stages},
                 {"schedule", enum_to_string(c.schedule)},
                 {"micro_batch_size", c.micro_batch},
                 {"zero_stage", c.zero_stage},
                 {"recompute", enum_to_string(c.recompute)},
                 {"sequence_parallel", c.sequence_parallel},
                 {"account_for_embedding_and_loss", c.count_ends},
                 {"microbatch_group_size_per_vp_stage", c.microbatch_group}};
  j["label"] = c.label();
  j["fidelity"] = to_string(l.fidelity);
  j["estimated_peak_memory_gib"] = l.estimate.peak_bytes / 1073741824.0;
  return j;
}

std::string csv(const PlanResult& r) {
  std::string out =
      "rank,tensor,pipeline,context,data,virtual_pipeline_stages,schedule,micro_batch_size,zero_stage,recompute,"
      "sequence_parallel,step_time_s,tokens_per_s,mfu,peak_memory_gib,bubble_fraction,exposed_comm_s,fits_in_memory,"
      "fidelity,sim_wall_s\n";
  char buf[512];
  auto row = [&](const PlannedLayout& l, const std::string& rank) {
    const Candidate& c = l.candidate;
    const StepResult& s = l.result;
    double exposed = 0;
    for (double x : s.breakdown.exposed_comm_s) exposed += x;
    std::snprintf(buf, sizeof buf, "%s,%lld,%lld,%lld,%lld,%lld,%s,%lld,%lld,%s,%s,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%s,%s,%.4g\n",
                  rank.c_str(), (long long)c.tensor, (long long)c.pipeline, (long long)c.context, (long long)c.data,
                  (long long)c.virtual_stages, std::string(enum_to_string(c.schedule)).c_str(), (long long)c.micro_batch,
                  (long long)c.zero_stage, std::string(enum_to_string(c.recompute)).c_str(),
                  c.sequence_parallel ? "true" : "false", s.step_time_s, s.tokens_per_s, s.mfu, s.peak_memory_gib,
                  s.bubble_fraction, exposed, s.fits_in_memory ? "true" : "false", std::string(to_string(l.fidelity)).c_str(),
                  l.sim_wall_s);
    out += buf;
  };
  for (size_t i = 0; i < r.layouts.size(); ++i) row(r.layouts[i], std::to_string(i + 1));
  for (const auto& l : r.not_fitting) row(l, "");
  return out;
}

void print_table(const PlanResult& r, size_t top) {
  std::printf("candidates: %lld considered, %lld invalid, %lld over memory, %lld dominated, %lld ruled out by the lower bound, "
              "%lld simulated (%lld did not fit)\n",
              (long long)r.considered, (long long)r.invalid, (long long)r.pruned_memory, (long long)r.pruned_dominated,
              (long long)r.pruned_bound, (long long)r.simulated, (long long)r.simulated_not_fitting);
  const double bounded = static_cast<double>(r.pruned_bound + r.simulated);
  if (bounded > 0)
    std::printf("prune rate: %.1f%% of the %lld layouts left after memory and dominance (%lld one-layer probes)\n",
                100.0 * static_cast<double>(r.pruned_bound) / bounded, (long long)bounded, (long long)r.probes);
  long long excluded = 0;
  for (const auto& [why, n] : r.excluded_by_bounds) excluded += n;
  if (excluded) {
    std::printf("excluded by the search bounds: %lld\n", excluded);
    for (const auto& [why, n] : r.excluded_by_bounds) std::printf("  %8lld  %s\n", (long long)n, why.c_str());
  }
  if (!r.invalid_by_reason.empty()) {
    std::printf("invalid, by reason:\n");
    for (const auto& [why, n] : r.invalid_by_reason) std::printf("  %8lld  %s\n", (long long)n, why.c_str());
  }
  if (r.layouts.empty()) {
    std::printf("\nno layout fits in memory\n");
    return;
  }
  std::printf("\n%4s  %-46s %10s %12s %6s %8s %7s %9s %s\n", "rank", "layout", "step (s)", "tokens/s", "MFU", "mem GiB",
              "bubble", "exp.comm", "fidelity");
  for (size_t i = 0; i < std::min(top, r.layouts.size()); ++i) {
    const auto& l = r.layouts[i];
    double exposed = 0;
    for (double x : l.result.breakdown.exposed_comm_s) exposed += x;
    std::printf("%4zu  %-46s %10.4g %12.6g %5.1f%% %8.2f %6.1f%% %8.3fs %s\n", i + 1, l.candidate.label().c_str(),
                l.result.step_time_s, l.result.tokens_per_s, 100 * l.result.mfu, l.result.peak_memory_gib,
                100 * l.result.bubble_fraction, exposed, std::string(to_string(l.fidelity)).c_str());
  }
  std::printf("\nPareto front (step time vs peak memory):\n");
  for (size_t i : r.pareto)
    std::printf("  %-46s %10.4g s %8.3f GiB  (%s)\n", r.layouts[i].candidate.label().c_str(), r.layouts[i].result.step_time_s,
                r.layouts[i].result.peak_memory_gib, std::string(to_string(r.layouts[i].fidelity)).c_str());
  const PlannedLayout* other = r.baseline ? &*r.baseline : (r.layouts.size() > 1 ? &r.layouts[1] : nullptr);
  if (other) {
    std::printf("\nwhy the winner wins (vs %s):\n", r.baseline ? "the baseline" : "the runner-up");
    for (const auto& line : explain(r.layouts[0], *other)) std::printf("%s\n", line.c_str());
  }
  std::printf("\nfidelity: exact = every micro-batch simulated; extrapolated = two runs (p, 2p micro-batches);\n"
              "screened = one run of p micro-batches (docs/planner.md). --exact simulates every candidate fully.\n");
}

}  // namespace

nlohmann::json plan_json(const Scenario& base, const PlanResult& r) {
  nlohmann::json j;
  j["scenario"] = base.name;
  j["candidates_considered"] = r.considered;
  j["candidates_invalid"] = r.invalid;
  j["candidates_pruned_memory"] = r.pruned_memory;
  j["candidates_pruned_dominated"] = r.pruned_dominated;
  j["candidates_pruned_bound"] = r.pruned_bound;
  j["candidates_simulated"] = r.simulated;
  j["candidates_simulated_not_fitting"] = r.simulated_not_fitting;
  const double bounded = static_cast<double>(r.pruned_bound + r.simulated);
  j["prune_rate"] = bounded > 0 ? static_cast<double>(r.pruned_bound) / bounded : 0.0;
  j["lower_bound_probes"] = r.probes;
  j["invalid_by_reason"] = r.invalid_by_reason;
  j["excluded_by_bounds"] = r.excluded_by_bounds;
  nlohmann::json layouts = nlohmann::json::array();
  for (size_t i = 0; i < r.layouts.size(); ++i) layouts.push_back(layout_entry(r.layouts[i], i + 1));
  j["layouts"] = layouts;
  nlohmann::json pareto = nlohmann::json::array();
  for (size_t i : r.pareto) pareto.push_back(i + 1);
  j["pareto_front"] = pareto;
  if (r.baseline) j["baseline"] = layout_entry(*r.baseline, 0);
  if (!r.layouts.empty()) {
    const PlannedLayout* other = r.baseline ? &*r.baseline : (r.layouts.size() > 1 ? &r.layouts[1] : nullptr);
    if (other) j["explanation"] = explain(r.layouts[0], *other);
  }
  return j;
}

// One entry of a sweep file: a scenario (relative to the sweep file) and its overrides.
int run_plan(int argc, char** argv) {
  const Args a = parse(argc, argv, 1, kOptions);
  if (a.flag("--help")) {
    std::printf("usage: paralab plan SCENARIO|SWEEP [options]      (under mpirun: the ranks share the simulations)\n%s",
                options_help(kOptions).c_str());
    return 0;
  }
  const std::string file = a.require_positional(0, "SCENARIO");
  std::vector<RunEntry> entries;
  if (auto sweep = read_run_list(file, "sweep")) entries = std::move(*sweep);
  else entries.push_back({"", file, {}});
  std::vector<Scenario> bases;
  for (const RunEntry& e : entries) {
    std::vector<std::string> sets = e.sets;
    sets.insert(sets.end(), a.sets.begin(), a.sets.end());
    bases.push_back(load_scenario(e.scenario, sets, /*check_layout=*/false));
  }
  check_outputs(a, {"--csv"});
  if (a.value("--csv") && entries.size() > 1) throw UsageError("--csv writes one plan; a sweep has " + std::to_string(entries.size()));
  PlanOptions o;
  if (auto v = a.value("--top")) o.top = static_cast<size_t>(std::max<int64_t>(1, to_int("--top", *v)));
  if (auto v = a.value("--threads")) o.threads = static_cast<int>(to_int("--threads", *v));
  if (auto v = a.value("--max-tensor")) o.bounds.max_tensor = to_int("--max-tensor", *v);
  if (auto v = a.value("--max-micro-batch")) o.bounds.max_micro_batch = to_int("--max-micro-batch", *v);
  if (auto v = a.value("--min-context-tokens")) o.bounds.min_context_tokens = to_int("--min-context-tokens", *v);
  if (auto v = a.value("--max-virtual-stages")) o.bounds.max_virtual_stages = to_int("--max-virtual-stages", *v);
  if (auto v = a.value("--schedules")) o.bounds.schedules = schedule_list(*v);
  o.exact = a.flag("--exact");
  o.prune = !a.flag("--no-prune");
  if (auto v = a.value("--refine")) o.refine = static_cast<size_t>(to_int("--refine", *v));

  // Under mpirun: the ranks share the simulations; rank 0 prints.
  std::unique_ptr<exec::Transport> world;
#if defined(PARALAB_EXEC_MPI)
  if (calib::launcher_size() > 1)
    world = exec::make_mpi_transport(&argc, &argv, exec::CoreTurnsMode::from_environment(), exec::DoorbellMode::from_environment());
#endif
  const bool root = !world || world->rank() == 0;
  if (world) o.runner = mpi_runner(*world, o.threads);
  // Progress on a terminal only, never with --json.
  const bool bar = root && !a.flag("--json") && ::isatty(STDERR_FILENO) != 0;
  const auto start = std::chrono::steady_clock::now();
  auto progress = [&](const PlanProgressInfo& p) {
    if (!bar) return;
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double rate = p.simulated > 0 ? el / static_cast<double>(p.simulated) : 0;
    std::fprintf(stderr, "\r\033[K%lld screened, %lld simulated, up to %lld ahead, ETA <= %.0f s", (long long)p.bounded,
                 (long long)p.simulated, (long long)p.remaining, rate * static_cast<double>(p.remaining));
  };
  nlohmann::json sweep_json = nlohmann::json::array();
  int status = 0;
  for (size_t i = 0; i < bases.size(); ++i) {
    if (auto v = a.value("--baseline")) o.baseline = parse_baseline(*v, bases[i]);
    const PlanResult r = plan(bases[i], o, progress);
    if (bar) std::fprintf(stderr, "\r\033[K");
    if (root) std::fprintf(stderr, "paralab plan: %s%s%lld candidates in %.1f s\n", entries[i].label.c_str(),
                           entries[i].label.empty() ? "" : ": ", (long long)r.considered, r.wall_s);
    if (r.layouts.empty()) status = 3;
    if (!root) continue;
    if (auto path = a.value("--csv")) write_file_atomic(*path, csv(r));
    if (a.flag("--json")) {
      nlohmann::json j = plan_json(bases[i], r);
      if (entries.size() == 1) std::printf("%s\n", j.dump(2).c_str());
      else sweep_json.push_back({{"label", entries[i].label}, {"plan", j}});
    } else {
      if (entries.size() > 1) std::printf("%s== %s ==\n", i ? "\n" : "", entries[i].label.c_str());
      print_table(r, o.top);
    }
  }
  if (root && a.flag("--json") && entries.size() > 1) std::printf("%s\n", nlohmann::json{{"sweep", sweep_json}}.dump(2).c_str());
  std::fflush(stdout);
  if (world) world->finalize();
  return status;
}

}  // namespace paralab::cli
