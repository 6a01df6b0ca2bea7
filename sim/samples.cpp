// paralab — simulate_samples(): N cluster draws on a thread pool (samples.hpp).
#include "sim/samples.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "ir/accounting.hpp"
#include "ir/error.hpp"
#include "sim/simulate.hpp"

namespace paralab::sim {

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto n = static_cast<double>(values.size());
  const auto k = static_cast<size_t>(std::max(1.0, std::ceil(q * n)));
  return values[std::min(k, values.size()) - 1];
}

namespace {

SampleRun run_one(const StepIR& ir, int64_t i, double model_flops, double peak) {
  SimulateOptions o;
  o.record_ops = false;  // only the step's end is needed: no per-op timings, no breakdown sweep
  o.per_rank = true;
  o.sample = i;
  const Simulation s = simulate(ir, o);
  SampleRun r;
  r.sample = i;
  r.step_time_s = s.end_us * 1e-6;
  const auto gpus = static_cast<double>(ir.layout.world());
  r.mfu = r.step_time_s > 0 && peak > 0 ? model_flops / r.step_time_s / gpus / 1e12 / peak : 0;
  if (!s.critical_compute_us.empty()) r.critical_rank = s.critical_compute_us.front().first;
  for (size_t g = 0; g < r.critical_comm_s.size(); ++g) r.critical_comm_s[g] = s.critical_comm_us[g] * 1e-6;
  r.simulated_ranks = s.simulated_ranks;
  return r;
}

}  // namespace

Distribution simulate_samples(const StepIR& ir, int64_t samples, int threads) {
  if (samples < 1) throw InternalError("simulate_samples: at least one sample");
  const double model_flops = step_flops(ir).model;
  const double peak = ir.scenario.topology.device.peak(gemm_math(ir.scenario.training.precision));
  Distribution d;
  d.runs.resize(static_cast<size_t>(samples));
  const int n_threads = static_cast<int>(std::min<int64_t>(
      samples, threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency())));
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mu;
  const auto work = [&] {
    for (int64_t i; (i = next.fetch_add(1)) < samples;) {
      try {
        d.runs[static_cast<size_t>(i)] = run_one(ir, i, model_flops, peak);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < n_threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);

  std::vector<double> times;
  std::map<int64_t, int64_t> slow;
  for (const SampleRun& r : d.runs) {
    times.push_back(r.step_time_s);
    d.mean_s += r.step_time_s;
    d.mean_mfu += r.mfu;
    ++slow[r.critical_rank];
    for (size_t g = 0; g < r.critical_comm_s.size(); ++g) d.mean_critical_comm_s[g] += r.critical_comm_s[g];
  }
  const auto n = static_cast<double>(samples);
  d.mean_s /= n;
  d.mean_mfu /= n;
  for (double& x : d.mean_critical_comm_s) x /= n;
  d.p50_s = percentile(times, 0.50);
  d.p90_s = percentile(times, 0.90);
  d.p99_s = percentile(times, 0.99);
  d.min_s = *std::min_element(times.begin(), times.end());
  d.max_s = *std::max_element(times.begin(), times.end());
  for (const auto& [rank, count] : slow) d.critical.push_back(RankCount{rank, count});
  std::stable_sort(d.critical.begin(), d.critical.end(),
                   [](const RankCount& a, const RankCount& b) { return a.samples > b.samples; });
  return d;
}

}  // namespace paralab::sim
