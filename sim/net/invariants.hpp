// paralab — checkers of the network model's invariants (docs/hardening.md, "Simulator
// invariants"). Each is a plain function of plain data, so a test can feed it a corrupted input
// and see it fire; the flow solver and the network model call them when their invariant checks
// are on (always in debug builds, on request in release: SimulateOptions::check_invariants).
// A violation is a bug in the simulator, never the user's: it throws InternalError.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string>

#include "ir/error.hpp"
#include "sim/net/topology_graph.hpp"

namespace paralab::sim {

// Whether the checks run when nobody says: on in debug builds (NDEBUG undefined), off in
// release so the fast path stays fast.
#ifdef NDEBUG
inline constexpr bool kCheckInvariantsByDefault = false;
#else
inline constexpr bool kCheckInvariantsByDefault = true;
#endif

// Relative slack of the link-capacity check: rates come from a sum of weight * level terms
// whose rounding is ~1e-15 relative.
inline constexpr double kLinkCapacitySlack = 1e-9;

[[noreturn]] inline void invariant_violated(const std::string& invariant, const std::string& detail) {
  throw InternalError("simulator invariant violated (" + invariant + "): " + detail);
}

// No link carries more than its bandwidth: for every link l in `links`,
// load[l] (sum over the flows crossing l of weight_fl * rate_f, symmetric copies included in
// the weights) <= capacity[l] * (1 + slack).
inline void check_link_loads(std::span<const double> capacity, std::span<const LinkId> links,
                             std::span<const double> load, double slack = kLinkCapacitySlack) {
  for (LinkId l : links) {
    if (l >= capacity.size() || l >= load.size())
      invariant_violated("link capacity", "link " + std::to_string(l) + " does not exist");
    const double c = capacity[l], x = load[l];
    if (!(x >= 0) || !std::isfinite(x) || x > c * (1 + slack))
      invariant_violated("link capacity", "link " + std::to_string(l) + " carries " + std::to_string(x) +
                                              " B/us over a capacity of " + std::to_string(c) + " B/us");
  }
}

// Every byte sent is received: a flow of `bytes` finishing at `now_us` with `residual` bytes
// still to move. The residual may be off by what the flow moves in the time-tie window
// (events closer than time_tie_eps are one event) plus rounding.
inline void check_flow_drained(uint64_t tag, double bytes, double residual, double rate_Bpus,
                               double now_us) {
  const double tie = 1e-9 + 1e-12 * std::abs(now_us);
  const double tol = (std::isfinite(rate_Bpus) ? 4 * tie * rate_Bpus : 0.0) + 1e-9 * bytes + 1e-6;
  if (!(std::abs(residual) <= tol))
    invariant_violated("bytes delivered", "flow of call " + std::to_string(tag) + " finished at " +
                                              std::to_string(now_us) + " us with " +
                                              std::to_string(residual) + " of its " +
                                              std::to_string(bytes) + " bytes not delivered");
}

// At the end of a run: every call that started finished, and every flow it put on the links
// finished (each one checked by check_flow_drained when it did).
inline void check_network_drained(uint64_t calls_started, uint64_t calls_finished, uint64_t flows_added,
                                  uint64_t flows_finished, size_t active_flows) {
  if (calls_started != calls_finished || flows_added != flows_finished || active_flows != 0)
    invariant_violated("bytes delivered",
                       "at the end of the step " + std::to_string(calls_started) + " calls started, " +
                           std::to_string(calls_finished) + " finished; " + std::to_string(flows_added) +
                           " flows added, " + std::to_string(flows_finished) + " finished, " +
                           std::to_string(active_flows) + " still active");
}

}  // namespace paralab::sim
