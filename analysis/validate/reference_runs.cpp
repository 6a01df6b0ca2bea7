// paralab — validate's reference executions (reference_runs.hpp).
#include "analysis/validate/reference_runs.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace paralab::calib {

using clock_type = std::chrono::steady_clock;

ReferenceRuns::ReferenceRuns(const ValidateOptions& opts, int64_t world, const std::filesystem::path& exe)
    : opts_(opts), launcher_(make_launcher(static_cast<int>(world))) {
  const int most = opts.steps > 0 ? opts.steps : kStepsPerLaunch;
  args_ = {exe.string(), "execute", opts.scenario.string(), "--backend", opts.backend, "--steps", std::to_string(most)};
  if (most > 1) args_.insert(args_.end(), {"--measure", seconds_arg(kMeasureS)});
  args_.insert(args_.end(), {"--warmup", seconds_arg(opts.warmup_s)});
  if (opts.slow_rank >= 0) {
    char f[32];
    std::snprintf(f, sizeof f, "%.17g", opts.slowdown);
    args_.insert(args_.end(), {"--slow-rank", std::to_string(opts.slow_rank), "--slowdown", f});
  }
  launch_ = launcher_.command_line(args_);
}

std::filesystem::path ReferenceRuns::trace(int run) const {
  return opts_.work_dir / ("measured-" + std::to_string(run) + ".json");
}

void ReferenceRuns::run() {
  if (opts_.runs > 0) {
    while (launches() < opts_.runs) launch_one();
    return;
  }
  while (launches() < kMaxRuns) {
    if (launches() >= kMinRuns && spent_s_ + spent_s_ / launches() > kBudgetS) break;
    launch_one();
  }
}

void ReferenceRuns::launch_one() {
  const auto t0 = clock_type::now();
  const int launch = launches();
  // Each measured step's trace lands at <prefix>-<k>.json, then takes its execution's name.
  const std::filesystem::path prefix = opts_.work_dir / ("launch-" + std::to_string(launch));
  std::vector<std::string> cmd = launcher_.prefix;
  cmd.insert(cmd.end(), args_.begin(), args_.end());
  cmd.insert(cmd.end(), {"--trace-steps", prefix.string(), "--json"});
  for (const auto& x : opts_.sets) {
    cmd.push_back("--set");
    cmd.push_back(x);
  }
  const bool counted = opts_.runs > 0;
  if (opts_.log)
    opts_.log("executing (launch " + std::to_string(launch + 1) + (counted ? " of " + std::to_string(opts_.runs) : "") + "): " + launch_);
  std::vector<std::string> err;
  const ProcessResult r = run_process(cmd, launcher_.env, [&](const std::string& line) { err.push_back(line); }, opts_.timeout_s);
  if (r.exit_code != 0)
    throw std::runtime_error("paralab execute failed (exit code " + std::to_string(r.exit_code) +
                             (r.timed_out ? ", timed out" : "") + "):\n" + last_lines(err, 20));
  // What a run warns of (an FP8 step that ran in bf16) qualifies the reference: pass it on.
  for (const std::string& line : err)
    if (line.find("warning: ") != std::string::npos && warned_.insert(line).second) {
      warnings_.push_back(line);
      if (opts_.log) opts_.log(line);
    }
  nlohmann::json j;
  std::vector<double> all;
  size_t warmup = 0;
  try {
    j = nlohmann::json::parse(r.out);
    all = j.at("step_times_s").get<std::vector<double>>();
    warmup = j.at("warmup_steps").get<size_t>();
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("paralab execute printed no JSON summary with its steps: ") + e.what());
  }
  if (warmup >= all.size()) throw std::runtime_error("paralab execute measured no step after its " + std::to_string(warmup) + " warm-up steps");
  std::string took;
  for (size_t k = warmup; k < all.size(); ++k) {
    const std::filesystem::path from = prefix.string() + "-" + std::to_string(k - warmup) + ".json";
    std::error_code ec;
    std::filesystem::rename(from, trace(count()), ec);
    if (ec) throw std::runtime_error("validate: cannot move " + from.string() + " to " + trace(count()).string() + ": " + ec.message());
    steps_s_.push_back(all[k]);
    launch_of_.push_back(launch);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.4g", took.empty() ? "" : ", ", all[k]);
    took += buf;
  }
  summaries_.push_back(std::move(j));
  spent_s_ += std::chrono::duration<double>(clock_type::now() - t0).count();
  if (opts_.log) opts_.log("measured: " + took + " s per step");
}

}  // namespace paralab::calib
