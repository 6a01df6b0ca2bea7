// paralab plan — every valid layout of the scenario's model on its cluster, simulated and
// ranked. Keys the scenario sets in [parallel] (and micro_batch_size, recompute) are pinned.
#include <chrono>
#include <cstdio>
#include <sstream>
#include <unistd.h>

#include "apps/cli.hpp"
#include "apps/commands.hpp"
#include "ir/enum_names.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/summary_json.hpp"
#include "plan/planner.hpp"
#include "results/result_io.hpp"

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
    {"--refine", true, "best screened layouts to re-simulate with two runs (default 16)"},
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
    else if (k == "recompute" && enum_from_string<Recompute>(v)) c.recompute = *enum_from_string<Recompute>(v);
    else if (k == "schedule" && enum_from_string<Schedule>(v)) {
      c.schedule = *enum_from_string<Schedule>(v);
      schedule_given = true;
    } else
      throw UsageError("--baseline: unknown key or value '" + item +
                       "' (keys: tensor, pipeline, context, data, virtual_pipeline_stages, schedule, micro_batch_size, "
                       "zero_stage, recompute, sequence_parallel)");
  }
  if (!schedule_given && c.virtual_stages > 1) c.schedule = Schedule::interleaved;
  if (c.data == 0) c.data = base.cluster.devices() / std::max<int64_t>(1, c.tensor * c.pipeline * c.context);
  return c;
}

nlohmann::json layout_entry(const PlannedLayout& l, size_t rank) {
  nlohmann::json j = summary_json(l.result);
  j.erase("ranks");
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
                 {"sequence_parallel", c.sequence_parallel}};
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
  std::printf("candidates: %lld considered, %lld invalid, %lld over memory, %lld dominated, %lld simulated (%lld did not fit), %.1f s\n",
              (long long)r.considered, (long long)r.invalid, (long long)r.pruned_memory, (long long)r.pruned_dominated,
              (long long)r.simulated, (long long)r.simulated_not_fitting, r.wall_s);
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

int run_plan(int argc, char** argv) {
  const Args a = parse(argc, argv, 1, kOptions);
  if (a.flag("--help")) {
    std::printf("usage: paralab plan SCENARIO [options]\n%s", options_help(kOptions).c_str());
    return 0;
  }
  const std::string file = a.require_positional(0, "SCENARIO");
  const Scenario base = load_scenario(file, a.sets, /*check_layout=*/false);
  check_outputs(a, {"--csv"});
  PlanOptions o;
  if (auto v = a.value("--top")) o.top = static_cast<size_t>(std::max<int64_t>(1, to_int("--top", *v)));
  if (auto v = a.value("--threads")) o.threads = static_cast<int>(to_int("--threads", *v));
  if (auto v = a.value("--max-tensor")) o.bounds.max_tensor = to_int("--max-tensor", *v);
  if (auto v = a.value("--max-micro-batch")) o.bounds.max_micro_batch = to_int("--max-micro-batch", *v);
  if (auto v = a.value("--min-context-tokens")) o.bounds.min_context_tokens = to_int("--min-context-tokens", *v);
  if (auto v = a.value("--max-virtual-stages")) o.bounds.max_virtual_stages = to_int("--max-virtual-stages", *v);
  o.exact = a.flag("--exact");
  if (auto v = a.value("--refine")) o.refine = static_cast<size_t>(to_int("--refine", *v));
  if (auto v = a.value("--baseline")) o.baseline = parse_baseline(*v, base);

  const bool tty = ::isatty(STDERR_FILENO) != 0;
  const auto start = std::chrono::steady_clock::now();
  auto progress = [&](int64_t done, int64_t total) {
    if (!tty) return;
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double eta = done > 0 ? el / static_cast<double>(done) * static_cast<double>(total - done) : 0;
    const int width = 30, fill = total > 0 ? static_cast<int>(width * done / total) : width;
    std::fprintf(stderr, "\r[%s%s] %lld/%lld simulated, ETA %.0f s   ", std::string(static_cast<size_t>(fill), '#').c_str(),
                 std::string(static_cast<size_t>(width - fill), ' ').c_str(), (long long)done, (long long)total, eta);
    if (done == total) std::fprintf(stderr, "\n");
  };
  const PlanResult r = plan(base, o, progress);

  if (auto path = a.value("--csv")) write_file_atomic(*path, csv(r));
  if (a.flag("--json")) {
    nlohmann::json j;
    j["scenario"] = base.name;
    j["candidates_considered"] = r.considered;
    j["candidates_invalid"] = r.invalid;
    j["candidates_pruned_memory"] = r.pruned_memory;
    j["candidates_pruned_dominated"] = r.pruned_dominated;
    j["candidates_simulated"] = r.simulated;
    j["candidates_simulated_not_fitting"] = r.simulated_not_fitting;
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
    j["plan_wall_s"] = r.wall_s;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    print_table(r, o.top);
  }
  return r.layouts.empty() ? 3 : 0;
}

}  // namespace paralab::cli
