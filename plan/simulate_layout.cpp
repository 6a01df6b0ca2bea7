// paralab — one layout simulated at a fidelity, and why one layout beats another (planner.hpp).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "ir/error.hpp"
#include "ir/schedule.hpp"
#include "ir/step_ir.hpp"
#include "plan/planner.hpp"
#include "sim/simulate.hpp"

namespace paralab {

namespace {

// Simulates a scenario; keeps the figures, and the largest per-micro-batch cost over ranks
// (compute plus the communication that grows with micro-batches) for screening extrapolation.
StepResult sim_figures(const Scenario& s, double* per_mb_max = nullptr) {
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
    const StepResult a = sim_figures(with_microbatches(s, c, ms), &per_mb);
    StepResult r = a;
    const double extra = static_cast<double>(m - ms);
    r.step_time_s = a.step_time_s + extra * per_mb;
    const double grow = static_cast<double>(m) / static_cast<double>(ms);
    r.breakdown.compute_s *= grow;
    for (CommClass k : {CommClass::tp, CommClass::cp, CommClass::pp})
      r.breakdown.exposed_comm_s[static_cast<size_t>(k)] *= grow;
    rescale(r, a, ms, m);
    // A short run keeps fewer micro-batches in flight than the full step (GPipe: all m;
    // 1F1B and ZB-H1: up to p; ZB-H2: up to 2p - 1): take the memory model's peak then.
    const ScheduleFn order = schedule_for(c.schedule);
    const int64_t v = c.virtual_stages;
    if (peak_in_flight(order({p, 0, ms, v})) < peak_in_flight(order({p, 0, m, v})))
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
  r.breakdown.offload_s = extend(a.breakdown.offload_s, b.breakdown.offload_s);
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
