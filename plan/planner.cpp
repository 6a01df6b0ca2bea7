// paralab — enumerate, prune, simulate in the order of the lower bounds, rank (planner.hpp).
#include "plan/planner.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include "ir/error.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/step_ir.hpp"
#include "plan/lower_bound.hpp"

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
// ZeRO-0 and needs less memory (bench/results/plan_speed.md). ZeRO-2/3 add communication.
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

struct Feasible {
  Candidate c;
  MemoryEstimate est;
  double bound_s = 0;
};

bool better(const PlannedLayout& a, const PlannedLayout& b) {
  if (a.result.tokens_per_s != b.result.tokens_per_s) return a.result.tokens_per_s > b.result.tokens_per_s;
  if (a.result.peak_memory_gib != b.result.peak_memory_gib) return a.result.peak_memory_gib < b.result.peak_memory_gib;
  return a.candidate.key() < b.candidate.key();
}

// The step time of the n-th best fitting layout so far (+inf with fewer): a candidate whose
// bound exceeds it cannot be among the n best.
double nth_step_s(std::vector<PlannedLayout> v, size_t n) {
  std::erase_if(v, [](const PlannedLayout& l) { return !l.result.fits_in_memory; });
  if (n == 0 || v.size() < n) return std::numeric_limits<double>::infinity();
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n - 1), v.end(), better);
  return v[n - 1].result.step_time_s;
}

// Enumerates the space: validation, the memory estimate, dominance. Returns the survivors.
std::vector<Feasible> enumerate_feasible(const Scenario& base, const PlanOptions& options, PlanResult& out) {
  const double capacity = base.topology.device.memory_gib * 1073741824.0;
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
    feasible.push_back({c, est, 0.0});
  }, out.excluded_by_bounds);
  // Dominance within each layout (same degrees, schedule, micro-batch, SP).
  std::map<std::string, std::vector<size_t>> groups;
  for (size_t i = 0; i < feasible.size(); ++i) groups[layout_key(feasible[i].c)].push_back(i);
  std::vector<Feasible> survivors;
  for (const auto& [key, idx] : groups)
    for (size_t i : idx) {
      bool dominated = false;
      for (size_t j : idx) dominated |= j != i && dominates(feasible[j].c, feasible[i].c);
      if (dominated) ++out.pruned_dominated;
      else survivors.push_back(feasible[i]);
    }
  return survivors;
}

// Each survivor's lower bound (lower_bound.hpp) on `threads` threads, then the survivors in the
// order of their bounds (ties: the layout's key).
void bound_and_order(const Scenario& base, std::vector<Feasible>& v, int threads, LowerBound& lb) {
  std::atomic<size_t> next{0};
  std::vector<std::exception_ptr> errors(v.size());
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < v.size();) try {
          v[i].bound_s = lb.step_s(apply(base, v[i].c));
        } catch (...) {
          errors[i] = std::current_exception();
        }
    });
  for (auto& t : pool) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  std::sort(v.begin(), v.end(), [](const Feasible& a, const Feasible& b) {
    return a.bound_s < b.bound_s || (a.bound_s == b.bound_s && a.c.key() < b.c.key());
  });
}

void pareto_front(PlanResult& out) {
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
}

}  // namespace

JobRunner local_runner(int threads, const std::function<void()>& done) {
  const int n_threads = std::max(1, threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency()));
  return [n_threads, done](const Scenario& base, const std::vector<SimJob>& jobs) {
    std::vector<PlannedLayout> out(jobs.size());
    std::atomic<size_t> next{0};
    std::vector<std::exception_ptr> errors(jobs.size());
    std::mutex mu;
    std::vector<std::thread> pool;
    for (int t = 0; t < std::min<int>(n_threads, static_cast<int>(jobs.size())); ++t)
      pool.emplace_back([&] {
        for (size_t i; (i = next.fetch_add(1)) < jobs.size();) {
          try {
            out[i] = simulate_layout(base, jobs[i].candidate, jobs[i].fidelity);
          } catch (...) {
            errors[i] = std::current_exception();
          }
          if (done) {
            std::lock_guard<std::mutex> lock(mu);
            done();
          }
        }
      });
    for (auto& t : pool) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
    return out;
  };
}

PlanResult plan(const Scenario& base, const PlanOptions& options, const PlanProgress& progress) {
  require_generated_model(base);
  const auto t0 = std::chrono::steady_clock::now();
  PlanResult out;
  const int threads = std::max(1, options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency()));
  const JobRunner run = options.runner ? options.runner : local_runner(threads);
  PlanProgressInfo info;
  auto report = [&] {
    if (progress) progress(info);
  };
  std::vector<Feasible> candidates = enumerate_feasible(base, options, out);
  info.considered = out.considered;
  LowerBound lb;
  if (options.prune) bound_and_order(base, candidates, threads, lb);
  out.probes = static_cast<int64_t>(lb.probes());
  info.bounded = static_cast<int64_t>(candidates.size());
  std::map<std::string, MemoryEstimate> estimate;
  for (const Feasible& f : candidates) estimate[f.c.key()] = f.est;
  auto simulate = [&](std::vector<SimJob> jobs) {
    std::vector<PlannedLayout> r = run(base, jobs);
    for (PlannedLayout& l : r) {
      auto it = estimate.find(l.candidate.key());
      l.estimate = it != estimate.end() ? it->second : estimate_memory(apply(base, l.candidate));  // the baseline
    }
    info.simulated += static_cast<int64_t>(r.size());
    return r;
  };

  // Screen in batches of the bounds' order: a candidate whose bound passes the N-th best step
  // screened so far cannot be among the N best (N: those refined, at least those shown).
  const size_t n_best = std::max(options.refine, options.top);
  const Fidelity first = options.exact ? Fidelity::exact : Fidelity::screened;
  std::vector<PlannedLayout> sims;
  std::vector<const Feasible*> pruned;
  size_t at = 0;
  while (at < candidates.size()) {
    const double threshold = options.prune ? nth_step_s(sims, n_best) : std::numeric_limits<double>::infinity();
    std::vector<SimJob> batch;
    for (; at < candidates.size() && batch.size() < options.batch; ++at) {
      if (candidates[at].bound_s > threshold) {
        for (size_t k = at; k < candidates.size(); ++k) pruned.push_back(&candidates[k]);  // sorted: the rest too
        at = candidates.size();
        break;
      }
      batch.push_back({candidates[at].c, first});
    }
    // Ahead: the candidates the current threshold does not rule out (the bounds are sorted).
    const auto ahead = std::upper_bound(candidates.begin() + static_cast<std::ptrdiff_t>(at), candidates.end(), threshold,
                                        [](double t, const Feasible& f) { return t < f.bound_s; });
    info.remaining = static_cast<int64_t>(ahead - (candidates.begin() + static_cast<std::ptrdiff_t>(at)));
    for (PlannedLayout& l : simulate(std::move(batch))) sims.push_back(std::move(l));
    report();
  }

  for (auto& s : sims) (s.result.fits_in_memory ? out.layouts : out.not_fitting).push_back(std::move(s));
  std::sort(out.layouts.begin(), out.layouts.end(), better);
  auto refine_and_finish = [&] {
    if (options.exact) return;
    std::vector<SimJob> jobs;
    std::vector<size_t> where;
    for (size_t i = 0; i < std::min(options.refine, out.layouts.size()); ++i)
      if (out.layouts[i].fidelity == Fidelity::screened) {
        jobs.push_back({out.layouts[i].candidate, Fidelity::extrapolated});
        where.push_back(i);
      }
    const std::vector<PlannedLayout> refined = simulate(jobs);
    for (size_t k = 0; k < where.size(); ++k) out.layouts[where[k]] = refined[k];
    std::sort(out.layouts.begin(), out.layouts.end(), better);
    for (int round = 0; round < 4 && !out.layouts.empty() && out.layouts[0].fidelity != Fidelity::exact; ++round) {
      out.layouts[0] = simulate({{out.layouts[0].candidate, Fidelity::exact}})[0];
      std::sort(out.layouts.begin(), out.layouts.end(), better);
    }
  };
  refine_and_finish();
  // Refined figures may have moved past a pruned bound: a pruned candidate that could now be
  // among the layouts shown is screened after all (it can no longer be among those refined).
  for (;;) {
    const double shown = nth_step_s(out.layouts, options.top);
    std::vector<SimJob> late;
    for (const Feasible* f : pruned)
      if (f->bound_s <= shown) late.push_back({f->c, first});
    if (late.empty()) break;
    std::erase_if(pruned, [&](const Feasible* f) { return f->bound_s <= shown; });
    for (PlannedLayout& l : simulate(late)) (l.result.fits_in_memory ? out.layouts : out.not_fitting).push_back(std::move(l));
    std::sort(out.layouts.begin(), out.layouts.end(), better);
  }
  out.pruned_bound = static_cast<int64_t>(pruned.size());
  out.simulated = static_cast<int64_t>(out.layouts.size() + out.not_fitting.size());
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
  pareto_front(out);
  if (options.baseline) {
    validate_scenario(apply(base, *options.baseline));
    out.baseline = simulate({{*options.baseline, Fidelity::exact}})[0];
  }
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace paralab
