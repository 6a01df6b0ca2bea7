// paralab — the planner: every valid layout of a model on a cluster, pruned by memory and by an
// admissible lower bound on its step (lower_bound.hpp), simulated in parallel (threads, or the
// ranks of an MPI job through a JobRunner), ranked by tokens/s (ties: less memory). Deterministic
// whatever the thread or rank count: candidates are simulated in fixed batches in the order of
// their bounds, independently, and sorted by a total order.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "plan/candidate.hpp"
#include "plan/memory_estimate.hpp"
#include "plan/search_space.hpp"
#include "results/step_result.hpp"

namespace paralab {

// How a layout's figures were obtained (docs/planner.md): a screening run with one pipeline's
// worth of micro-batches, extrapolated per micro-batch from its breakdown; two runs (p and 2p
// micro-batches) extrapolated linearly, exact once the pipeline is full; or every micro-batch.
enum class Fidelity : uint8_t { screened, extrapolated, exact };
std::string_view to_string(Fidelity f);

struct PlannedLayout {
  Candidate candidate;
  StepResult result;       // figures (ops not kept)
  MemoryEstimate estimate;
  Fidelity fidelity = Fidelity::exact;
  double sim_wall_s = 0;  // wall time spent building and simulating this layout
};

// One layout to simulate at a fidelity.
struct SimJob {
  Candidate candidate;
  Fidelity fidelity = Fidelity::screened;
};
// Simulates every job, results in job order (simulate_layout of each). The planner's only way of
// simulating: a local thread pool (local_runner), or the ranks of an MPI job (apps/plan_mpi.cpp).
using JobRunner = std::function<std::vector<PlannedLayout>(const Scenario& base, const std::vector<SimJob>& jobs)>;

struct PlanProgressInfo {
  int64_t considered = 0;  // enumerated so far
  int64_t bounded = 0;     // with their lower bound
  int64_t simulated = 0;   // simulations done
  int64_t remaining = 0;   // simulations still ahead that the bounds do not rule out
};
using PlanProgress = std::function<void(const PlanProgressInfo&)>;

struct PlanOptions {
  SearchBounds bounds;
  int threads = 0;         // 0: every core
  size_t top = 10;         // layouts shown
  size_t refine = 16;      // best screened layouts re-simulated with two runs (>= the top 10 shown)
  bool exact = false;      // simulate every candidate with all its micro-batches
  bool prune = true;       // skip candidates whose lower bound rules them out of the top
  size_t batch = 32;       // candidates simulated between two updates of the bound's threshold
  std::optional<Candidate> baseline;  // a layout to compare the winner with
  JobRunner runner;        // empty: local_runner(threads)
};


struct PlanResult {
  int64_t considered = 0;     // candidates enumerated within the bounds
  int64_t invalid = 0;        // refused by validation
  int64_t pruned_memory = 0;  // estimated over the device memory
  int64_t pruned_dominated = 0;  // a lighter recomputation / ZeRO stage of the same layout fits
  int64_t pruned_bound = 0;   // its lower bound beyond the N-th best step found: never in the top
  int64_t probes = 0;         // one-layer probes built for the bounds
  int64_t simulated = 0;
  int64_t simulated_not_fitting = 0;
  std::map<std::string, int64_t> invalid_by_reason, excluded_by_bounds;
  std::vector<PlannedLayout> layouts;        // every simulated candidate that fits, best first
  std::vector<PlannedLayout> not_fitting;    // simulated, over memory
  std::vector<size_t> pareto;                // indices into layouts: step time vs peak memory front
  std::optional<PlannedLayout> baseline;
  double wall_s = 0;
};

PlanResult plan(const Scenario& base, const PlanOptions& options, const PlanProgress& progress = {});

// Simulates the jobs on `threads` threads (0: every core); `done` is called after each.
JobRunner local_runner(int threads, const std::function<void()>& done = {});

// Simulates one layout at a fidelity. `screen` (optional) is the layout's screening result,
// reused as the first of the two runs of the extrapolated fidelity.
PlannedLayout simulate_layout(const Scenario& base, const Candidate& c, Fidelity f,
                              const StepResult* screen = nullptr);

// Why the winner beats `other`, from their breakdowns (one line per difference that matters).
std::vector<std::string> explain(const PlannedLayout& winner, const PlannedLayout& other);

}  // namespace paralab
