// paralab — a collective call compiled onto the links: phases of flows, each flow a weighted
// list of links, independent of the byte count (a call of N bytes moves frac * N per flow).
//
// Symmetric copies (docs/network.md, "Symmetric copies"): the engine simulates one
// representative instance of a communication that the layout repeats in other tp/cp/dp groups
// or (tp, cp, dp) pairs. Every copy is routed once here; on each link of the representative's
// own routes the weight counts every transfer of every copy that crosses it, so the solver's
// constraint sum_f w_fl * r_f <= c_l charges the link for all the copies sharing it. Copies'
// traffic on links the representative does not use is not modelled: exact when placements are
// symmetric (each copy then sees the same contention on its own links), an approximation when
// they are not.
#pragma once

#include <array>
#include <vector>

#include "sim/net/collective.hpp"
#include "sim/net/flow_solver.hpp"

namespace paralab::sim {

struct FlowTemplate {
  double frac = 0;                 // the flow moves frac * N bytes (per transfer)
  std::vector<LinkLoad> loads;     // sorted by link id; weights relative to frac
  std::array<double, kLinkClasses> class_weight{};  // sum of weights per link class
  double us_per_byte = 0;          // isolated time per byte of N: frac * max_l w_l / c_l
};

struct PhaseTemplate {
  double latency_us = 0;
  std::vector<FlowTemplate> flows;
};

struct Pattern {
  AlgoId algo = AlgoId::ring;
  std::vector<PhaseTemplate> phases;
  double lat_us = 0;       // sum of phase latencies (the call's launch latency excluded)
  double us_per_byte = 0;  // sum over phases of the slowest flow's us_per_byte
  // The call's duration with no other traffic on the network, launch excluded.
  [[nodiscard]] double isolated_us(double bytes) const { return lat_us + bytes * us_per_byte; }
};

class PatternCompiler {
 public:
  PatternCompiler(Router& router, const std::vector<double>& capacity_Bpus);
  // copies[k][i] is the rank that plays member i in copy k; copies[0] is the representative.
  Pattern compile(const LogicalPattern& logical, AlgoId algo,
                  const std::vector<std::vector<int64_t>>& copies);

 private:
  FlowTemplate compile_flow(const LogicalFlow& flow,
                            const std::vector<std::vector<int64_t>>& copies);

  Router& router_;
  const std::vector<double>& cap_;
  uint32_t epoch_ = 0;
  std::vector<uint32_t> mark_;
  std::vector<double> weight_;
  std::vector<LinkId> touched_;
};

}  // namespace paralab::sim
