// paralab — enumerate, prune, simulate, rank.
#include "plan/planner.hpp"

#include "ir/error.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include "ir/scenario_loader.hpp"
#include "ir/step_ir.hpp"
#include "sim/simulate.hpp"

namespace paralab {

namespace {

// A validation failure's reason without its numbers, so equal reasons count together.
std::string reason_of(const ConfigError& e) {
  std::string p = e.problem();
  if (auto cut = p.find(" ("); cut != std::string::npos) p = p.substr(0, cut);
  std::string out;
  for (char ch : p) {
    if (ch >= '0' && ch <= '9') {
      if (out.empty() || out.back() != '#') out += '#';
    } else {
      out += ch;
    }
  }
  return e.key() + ": " + out;
}

// The cost order of ZeRO stages: 1 < 0 < 2 < 3. ZeRO-1 moves the same bytes as plain data
// parallelism (a reduce-scatter and an all-gather make one all-reduce; Rajbhandari et al. 2020,
// Sec. 7.2.1) while its optimizer step touches 1/dp of the states, so it is never slower than
// ZeRO-0 and needs less memory (measured over the 197 pairs of the GPT-3 175B sweep: ZeRO-0 at
// 0.94-0.999x ZeRO-1's tokens/s, never faster; bench/results/plan_speed.md). ZeRO-2/3 add
// communication (per-bucket reduce-scatters, parameter all-gathers).
int zero_cost(int64_t z) { return z == 1 ? 0 : z == 0 ? 1 : static_cast<int>(z); }

// (z2, rc2) makes (z1, rc1) pointless when it is no heavier in either and lighter in one: less
// recomputation and less ZeRO communication never make a step slower.
bool dominates(const Candidate& a, const Candidate& b) {
  const bool rc_le = a.recompute <= b.recompute, z_le = zero_cost(a.zero_stage) <= zero_cost(b.zero_stage);
  const bool strictly = a.recompute < b.recompute || zero_cost(a.zero_stage) < zero_cost(b.zero_stage);
  return rc_le && z_le && strictly;
}

std::string layout_key(const Candidate& c) {
  Candidate k = c;
  k.zero_stage = 0;
  k.recompute = Recompute::none;
  return k.key();
}

// Simulates a scenario; keeps the figures, and the largest per-micro-batch cost over ranks
// (compute plus the communication that grows with micro-batches) for screening extrapolation.
StepResult sim_figures(const Scenario& s, const StepIR** keep = nullptr, double* per_mb_max = nullptr) {
  (void)keep;
  const StepIR ir = build_step_ir(s);
  StepResult r = sim::simulate(ir, sim::SimulateOptions{}).result;
  if (per_mb_max) {
    double worst = 0;
    for (const RankStats& rs : r.ranks) {  // finalize's per-rank breakdowns
      const Breakdown& b = rs.breakdown;
      const double grows = b.compute_s + b.exposed_comm_s[static_cast<size_t>(CommClass::tp)] +
                           b.exposed_comm_s[static_cast<size_t>(CommClass::cp)] +
                           b.exposed_comm_s[static_cast<size_t>(CommClass::pp)];
      worst = std::max(worst, grows);
    }
    *per_mb_max = worst / static_cast<double>(s.num_microbatches());
  }
  r.ops.clear();
  r.ops.shrink_to_fit();
  return r;
}

Scenario with_microbatches(const Scenario& s, const Candidate& c, int64_t m) {
  Scenario r = s;
  r.training.global_batch_size = m * c.micro_batch * c.data;
  return r;
}

// Rates and fractions of a result whose step time (and breakdown) were extrapolated from a
// run with `m_run` micro-batches to `m` micro-batches.
void rescale(StepResult& r, const StepResult& run, int64_t m_run, int64_t m) {
  const double scale = run.step_time_s / r.step_time_s * static_cast<double>(m) / static_cast<double>(m_run);
  r.tokens_per_s = run.tokens_per_s * scale;
  r.model_tflops_per_gpu = run.model_tflops_per_gpu * scale;
  r.hardware_tflops_per_gpu = run.hardware_tflops_per_gpu * scale;
  r.mfu = run.mfu * scale;
  r.bubble_fraction = r.breakdown.bubble_s / r.step_time_s;
}

}  // namespace

PlannedLayout simulate_layout_untimed(const Scenario& base, const Candidate& c, Fidelity f, const StepResult* screen);

std::string_view to_string(Fidelity f) {
  switch (f) {
    case Fidelity::screened: return "screened";
    case Fidelity::extrapolated: return "extrapolated";
    case Fidelity::exact: return "exact";
  }
  return "?";
}

PlannedLayout simulate_layout(const Scenario& base, const Candidate& c, Fidelity f, const StepResult* screen) {
  const auto t0 = std::chrono::steady_clock::now();
  PlannedLayout out;
  try {
    out = simulate_layout_untimed(base, c, f, screen);
  } catch (const InternalError& e) {  // a bug: name the layout that shows it
    throw InternalError("planner: layout " + c.label() + " (" + std::string(to_string(f)) + "): " + e.what());
  }
  out.sim_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

PlannedLayout simulate_layout_untimed(const Scenario& base, const Candidate& c, Fidelity f, const StepResult* screen) {
  PlannedLayout out;
  out.candidate = c;
  const Scenario s = apply(base, c);
  out.estimate = estimate_memory(s);
  const int64_t m = s.num_microbatches(), p = c.pipeline;
  const double capacity = s.topology.device.memory_gib * 1073741824.0;
  // One pipeline's worth of micro-batches (whole rounds of p for the interleaved schedule).
  const int64_t m1 = p, m2 = 2 * p;
  // The screening run's micro-batches (see below); small steps are simulated whole.
  const int64_t ms = c.schedule == Schedule::interleaved ? m1 : std::min<int64_t>(m1, 4);
  if (f == Fidelity::exact || (f == Fidelity::screened && m <= ms) || (f == Fidelity::extrapolated && m <= m2)) {
    out.result = sim_figures(s);
    out.fidelity = Fidelity::exact;
    return out;
  }
  if (f == Fidelity::screened) {
    // With equal stages the step is (m + p - 1) t + tail for GPipe and 1F1B at any m >= 1
    // (Narayanan et al. 2021, Sec. 2.2), so a few micro-batches show t; the interleaved
    // schedule needs whole rounds of p. Each further micro-batch adds, on the busiest rank, its
    // compute and the tensor/context/pipeline communication it exposes; the bubble and the
    // data-parallel tail stay.
    double per_mb = 0;
    const StepResult a = sim_figures(with_microbatches(s, c, ms), nullptr, &per_mb);
    StepResult r = a;
    const double extra = static_cast<double>(m - ms);
    r.step_time_s = a.step_time_s + extra * per_mb;
    const double grow = static_cast<double>(m) / static_cast<double>(ms);
    r.breakdown.compute_s *= grow;
    for (CommClass k : {CommClass::tp, CommClass::cp, CommClass::pp})
      r.breakdown.exposed_comm_s[static_cast<size_t>(k)] *= grow;
    rescale(r, a, ms, m);
    // A short run keeps fewer micro-batches in flight than the full step (GPipe: all m;
    // 1F1B: up to p): take the memory model's peak then.
    if (c.schedule == Schedule::gpipe || ms < std::min(m, p))
      r.peak_memory_gib = std::max(r.peak_memory_gib, out.estimate.peak_bytes / 1073741824.0);
    r.fits_in_memory = r.peak_memory_gib * 1073741824.0 <= capacity;
    out.result = r;
    out.fidelity = Fidelity::screened;
    out.result.events = a.events;
    return out;
  }
  // Two runs; the step time and each part of it are linear in m once the pipeline is full
  // (1F1B: (m + p - 1) t; Narayanan et al. 2021, Sec. 2.2).
  const StepResult a = screen ? *screen : sim_figures(with_microbatches(s, c, m1));
  const StepResult b = sim_figures(with_microbatches(s, c, m2));
  const double k = static_cast<double>(m - m2) / static_cast<double>(m2 - m1);
  auto extend = [&](double x1, double x2) { return x2 + (x2 - x1) * k; };
  StepResult r = b;
  r.step_time_s = extend(a.step_time_s, b.step_time_s);
  r.breakdown.compute_s = extend(a.breakdown.compute_s, b.breakdown.compute_s);
  r.breakdown.bubble_s = extend(a.breakdown.bubble_s, b.breakdown.bubble_s);
  r.breakdown.host_s = extend(a.breakdown.host_s, b.breakdown.host_s);
  for (int i = 0; i < kCommClasses; ++i)
    r.breakdown.exposed_comm_s[static_cast<size_t>(i)] =
        extend(a.breakdown.exposed_comm_s[static_cast<size_t>(i)], b.breakdown.exposed_comm_s[static_cast<size_t>(i)]);
  r.peak_memory_gib = std::max(b.peak_memory_gib, extend(a.peak_memory_gib, b.peak_memory_gib));
  r.fits_in_memory = r.peak_memory_gib * 1073741824.0 <= capacity;
  rescale(r, b, m2, m);
  r.events = a.events + b.events;
  out.result = r;
  out.fidelity = Fidelity::extrapolated;
  return out;
}

PlanResult plan(const Scenario& base, const PlanOptions& options, const PlanProgress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  PlanResult out;
  const double capacity = base.topology.device.memory_gib * 1073741824.0;
  struct Feasible {
    Candidate c;
    MemoryEstimate est;
  };
  std::vector<Feasible> feasible;
  const SearchSpace space = search_space(base, options.bounds);
  enumerate(base, space, options.bounds, [&](const Candidate& c) {
    ++out.considered;
    const Scenario s = apply(base, c);
    try {
      validate_scenario(s);
    } catch (const ConfigError& e) {
      ++out.invalid;
      ++out.invalid_by_reason[reason_of(e)];
      return;
    }
    const MemoryEstimate est = estimate_memory(s);
    if (est.peak_bytes > capacity) {
      ++out.pruned_memory;
      return;
    }
    feasible.push_back({c, est});
  }, out.excluded_by_bounds);

  // Dominance within each layout (same degrees, schedule, micro-batch, SP).
  std::map<std::string, std::vector<size_t>> groups;
  for (size_t i = 0; i < feasible.size(); ++i) groups[layout_key(feasible[i].c)].push_back(i);
  std::vector<Feasible> to_simulate;
  for (const auto& [key, idx] : groups)
    for (size_t i : idx) {
      bool dominated = false;
      for (size_t j : idx) dominated |= j != i && dominates(feasible[j].c, feasible[i].c);
      if (dominated) ++out.pruned_dominated;
      else to_simulate.push_back(feasible[i]);
    }

  // Simulate: every survivor screened, the best refined, the winner exact (docs/planner.md).
  const int threads = std::max(1, options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency()));
  const Fidelity first = options.exact ? Fidelity::exact : Fidelity::screened;
  std::vector<PlannedLayout> sims(to_simulate.size());
  std::atomic<int64_t> done{0};
  const int64_t total = static_cast<int64_t>(to_simulate.size()) + (options.exact ? 0 : static_cast<int64_t>(options.refine) + 1);
  std::mutex progress_mu;
  auto tick = [&] {
    const int64_t d = ++done;
    if (!progress) return;
    std::lock_guard<std::mutex> lock(progress_mu);
    progress(std::min(d, total), total);
  };
  // Runs fn(i) for i in [0, n) on the pool; results land in per-index slots (deterministic).
  auto parallel_for = [&](size_t n, const std::function<void(size_t)>& fn) {
    std::atomic<size_t> next{0};
    std::vector<std::exception_ptr> errors(n);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&] {
        for (size_t i; (i = next.fetch_add(1)) < n;) {
          try {
            fn(i);
          } catch (...) {
            errors[i] = std::current_exception();
          }
          tick();
        }
      });
    for (auto& t : pool) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  };
  parallel_for(to_simulate.size(), [&](size_t i) {
    sims[i] = simulate_layout(base, to_simulate[i].c, first);
    sims[i].estimate = to_simulate[i].est;
  });
  out.simulated = static_cast<int64_t>(sims.size());

  auto better = [](const PlannedLayout& a, const PlannedLayout& b) {
    if (a.result.tokens_per_s != b.result.tokens_per_s) return a.result.tokens_per_s > b.result.tokens_per_s;
    if (a.result.peak_memory_gib != b.result.peak_memory_gib) return a.result.peak_memory_gib < b.result.peak_memory_gib;
    return a.candidate.key() < b.candidate.key();
  };
  for (auto& s : sims) (s.result.fits_in_memory ? out.layouts : out.not_fitting).push_back(std::move(s));
  std::sort(out.layouts.begin(), out.layouts.end(), better);

  if (!options.exact) {
    // Refine the best screened layouts with a second run, then make the winner exact.
    const size_t n = std::min(options.refine, out.layouts.size());
    parallel_for(n, [&](size_t i) {
      PlannedLayout& l = out.layouts[i];
      if (l.fidelity != Fidelity::screened) return;
      const MemoryEstimate est = l.estimate;
      // The screening run was the first of the two (its unextrapolated figures are re-derived).
      l = simulate_layout(base, l.candidate, Fidelity::extrapolated);
      l.estimate = est;
    });
    std::sort(out.layouts.begin(), out.layouts.end(), better);
    for (int round = 0; round < 4 && !out.layouts.empty() && out.layouts[0].fidelity != Fidelity::exact; ++round) {
      const MemoryEstimate est = out.layouts[0].estimate;
      out.layouts[0] = simulate_layout(base, out.layouts[0].candidate, Fidelity::exact);
      out.layouts[0].estimate = est;
      tick();
      std::sort(out.layouts.begin(), out.layouts.end(), better);
    }
  }
  // A layout the detailed run finds over memory leaves the ranking.
  for (size_t i = 0; i < out.layouts.size();)
    if (!out.layouts[i].result.fits_in_memory) {
      out.not_fitting.push_back(std::move(out.layouts[i]));
      out.layouts.erase(out.layouts.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  out.simulated_not_fitting = static_cast<int64_t>(out.not_fitting.size());
  std::sort(out.not_fitting.begin(), out.not_fitting.end(), better);

  // Pareto front of step time against peak memory.
  for (size_t i = 0; i < out.layouts.size(); ++i) {
    const auto& a = out.layouts[i].result;
    bool dominated = false;
    for (size_t j = 0; j < out.layouts.size() && !dominated; ++j) {
      const auto& b = out.layouts[j].result;
      dominated = j != i && b.step_time_s <= a.step_time_s && b.peak_memory_gib <= a.peak_memory_gib &&
                  (b.step_time_s < a.step_time_s || b.peak_memory_gib < a.peak_memory_gib);
    }
    if (!dominated) out.pareto.push_back(i);
  }
  std::sort(out.pareto.begin(), out.pareto.end(), [&](size_t x, size_t y) {
    return out.layouts[x].result.peak_memory_gib < out.layouts[y].result.peak_memory_gib ||
           (out.layouts[x].result.peak_memory_gib == out.layouts[y].result.peak_memory_gib && x < y);
  });

  if (options.baseline) {
    const Scenario s = apply(base, *options.baseline);
    validate_scenario(s);
    out.baseline = simulate_layout(base, *options.baseline, Fidelity::exact);
  }
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

std::vector<std::string> explain(const PlannedLayout& w, const PlannedLayout& o) {
  std::vector<std::string> lines;
  char buf[256];
  const StepResult& a = w.result;
  const StepResult& b = o.result;
  std::snprintf(buf, sizeof buf, "%s is %.1f%% faster than %s (%.3f s vs %.3f s per step)", w.candidate.label().c_str(),
                100.0 * (b.step_time_s / a.step_time_s - 1.0), o.candidate.label().c_str(), a.step_time_s, b.step_time_s);
  lines.push_back(buf);
  struct Part {
    const char* what;
    double x, y;
  };
  std::vector<Part> parts{{"compute", a.breakdown.compute_s, b.breakdown.compute_s},
                          {"pipeline bubble", a.breakdown.bubble_s, b.breakdown.bubble_s}};
  for (int c = 0; c < kCommClasses; ++c)
    parts.push_back({c == 0 ? "exposed tp communication" : c == 1 ? "exposed cp communication" : c == 2 ? "exposed dp communication"
                             : c == 3 ? "exposed pp communication" : "exposed other communication",
                     a.breakdown.exposed_comm_s[static_cast<size_t>(c)], b.breakdown.exposed_comm_s[static_cast<size_t>(c)]});
  std::sort(parts.begin(), parts.end(), [](const Part& p, const Part& q) { return std::abs(p.x - p.y) > std::abs(q.x - q.y); });
  for (const Part& p : parts) {
    if (std::abs(p.x - p.y) < 0.005 * b.step_time_s) continue;
    std::snprintf(buf, sizeof buf, "  %s: %.3f s vs %.3f s (%+.3f s)", p.what, p.x, p.y, p.x - p.y);
    lines.push_back(buf);
  }
  std::snprintf(buf, sizeof buf, "  bubble fraction %.1f%% vs %.1f%%; MFU %.1f%% vs %.1f%%; peak memory %.1f GiB vs %.1f GiB",
                100 * a.bubble_fraction, 100 * b.bubble_fraction, 100 * a.mfu, 100 * b.mfu, a.peak_memory_gib, b.peak_memory_gib);
  lines.push_back(buf);
  return lines;
}

}  // namespace paralab
