// paralab — validate's reference executions, in blocks (reference_runs.hpp).
#include "analysis/reference_runs.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace paralab::calib {

using clock_type = std::chrono::steady_clock;

ReferenceRuns::ReferenceRuns(const ValidateOptions& opts, int64_t world, const std::filesystem::path& exe)
    : opts_(opts), launcher_(make_launcher(static_cast<int>(world))) {
  args_ = {exe.string(), "execute", opts.scenario.string(), "--backend", opts.backend,
           "--steps", std::to_string(std::max(1, opts.steps)), "--warmup", seconds_arg(opts.warmup_s)};
  launch_ = launcher_.command_line(args_);
}

std::filesystem::path ReferenceRuns::trace(int run) const {
  return opts_.work_dir / ("measured-" + std::to_string(run) + ".json");
}

void ReferenceRuns::run_block(int k, int blocks) {
  if (blocks < 1 || k < 0 || k >= blocks) throw std::invalid_argument("ReferenceRuns::run_block: block out of range");
  // The share of the whole that this block completes, as a count rounded to the nearest.
  const auto share = [&](int whole) { return (whole * (k + 1) + blocks / 2) / blocks; };
  if (opts_.runs > 0) {
    while (count() < share(opts_.runs)) run_one();
    return;
  }
  const double until_s = kBudgetS * (k + 1) / blocks;
  const int least = (kMinRuns * (k + 1) + blocks - 1) / blocks;  // rounded up: the minimum holds
  const int most = std::max(least, share(kMaxRuns));
  while (count() < most) {
    if (count() >= least && spent_s_ + spent_s_ / count() > until_s) break;
    run_one();
  }
}

void ReferenceRuns::run_one() {
  const auto t0 = clock_type::now();
  const int run = count();
  std::vector<std::string> cmd = launcher_.prefix;
  cmd.insert(cmd.end(), args_.begin(), args_.end());
  cmd.insert(cmd.end(), {"--trace", trace(run).string(), "--json"});
  for (const auto& x : opts_.sets) {
    cmd.push_back("--set");
    cmd.push_back(x);
  }
  const bool counted = opts_.runs > 0;
  if (opts_.log) opts_.log("executing (run " + std::to_string(run + 1) + (counted ? " of " + std::to_string(opts_.runs) : "") + "): " + launch_);
  std::vector<std::string> err;
  const ProcessResult r = run_process(cmd, launcher_.env, [&](const std::string& line) { err.push_back(line); }, opts_.timeout_s);
  if (r.exit_code != 0)
    throw std::runtime_error("paralab execute failed (exit code " + std::to_string(r.exit_code) +
                             (r.timed_out ? ", timed out" : "") + "):\n" + last_lines(err, 20));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(r.out);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("paralab execute printed no JSON summary: ") + e.what());
  }
  const double step = j.at("step_time_s").get<double>();
  steps_s_.push_back(step);
  summaries_.push_back(std::move(j));
  spent_s_ += std::chrono::duration<double>(clock_type::now() - t0).count();
  char buf[96];
  std::snprintf(buf, sizeof buf, "measured: %.4g s per step", step);
  if (opts_.log) opts_.log(buf);
}

}  // namespace paralab::calib
