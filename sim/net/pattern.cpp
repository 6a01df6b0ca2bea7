// paralab — compiling logical patterns onto links, symmetric copies included (pattern.hpp).
#include "sim/net/pattern.hpp"

#include <algorithm>

namespace paralab::sim {

PatternCompiler::PatternCompiler(Router& router, const std::vector<double>& capacity_Bpus)
    : router_(router),
      cap_(capacity_Bpus),
      mark_(capacity_Bpus.size(), 0),
      weight_(capacity_Bpus.size(), 0.0) {}

Pattern PatternCompiler::compile(const LogicalPattern& logical, AlgoId algo,
                                 const std::vector<std::vector<int64_t>>& copies) {
  Pattern p;
  p.algo = algo;
  for (const LogicalPhase& lp : logical.phases) {
    PhaseTemplate phase;
    phase.latency_us = lp.latency_us;
    double slowest = 0;
    for (const LogicalFlow& lf : lp.flows) {
      FlowTemplate ft = compile_flow(lf, copies);
      if (ft.frac <= 0) continue;
      slowest = std::max(slowest, ft.us_per_byte);
      phase.flows.push_back(std::move(ft));
    }
    p.lat_us += phase.latency_us;
    p.us_per_byte += slowest;
    p.phases.push_back(std::move(phase));
  }
  return p;
}

FlowTemplate PatternCompiler::compile_flow(const LogicalFlow& flow,
                                           const std::vector<std::vector<int64_t>>& copies) {
  FlowTemplate ft;
  for (const Transfer& t : flow.transfers) ft.frac = std::max(ft.frac, t.frac);
  if (ft.frac <= 0) return ft;
  // Pass 1: the representative's links.
  ++epoch_;
  touched_.clear();
  const std::vector<int64_t>& rep = copies.front();
  for (const Transfer& t : flow.transfers) {
    const auto& r = router_.route(rep[t.src], rep[t.dst]);
    for (LinkId l : router_.links(r)) {
      if (mark_[l] == epoch_) continue;
      mark_[l] = epoch_;
      weight_[l] = 0;
      touched_.push_back(l);
    }
  }
  // Pass 2: every copy's transfers (the representative's included) weigh on those links.
  for (const auto& copy : copies)
    for (const Transfer& t : flow.transfers) {
      const double w = t.frac / ft.frac;
      const auto& r = router_.route(copy[t.src], copy[t.dst]);
      for (LinkId l : router_.links(r))
        if (mark_[l] == epoch_) weight_[l] += w;
    }
  std::sort(touched_.begin(), touched_.end());
  double worst = 0;  // us per byte of the flow on its most loaded link
  ft.loads.reserve(touched_.size());
  for (LinkId l : touched_) {
    ft.loads.push_back(LinkLoad{l, weight_[l]});
    ft.class_weight[static_cast<size_t>(router_.graph().link(l).cls)] += weight_[l];
    worst = std::max(worst, weight_[l] / cap_[l]);
  }
  ft.us_per_byte = ft.frac * worst;
  return ft;
}

}  // namespace paralab::sim
