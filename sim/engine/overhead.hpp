// paralab — what the measured corrections (ir/correction.hpp, Topology::calibration) add to each
// op of a stage: the one place the engine asks for an op's correction (docs/simulator.md,
// "Corrections"). Resolved once per op when a stage is set up, so the event loop only reads
// three numbers per op.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/correction.hpp"
#include "ir/step_ir.hpp"

namespace paralab::sim {

struct OpOverhead {
  Correction time;          // the op's own time: fixed_us + factor x modeled
  double dispatch_us = 0;   // the gap after its stream predecessor, when that was its last constraint
  double handoff_us = 0;    // the gap after a dependency on another stream, when that was its last
};

// The facts the table's classes are made of, for `op` run by `rank`: its kind, collective kind,
// span (whether its group's members, or a transfer's two ends, share a node), phase and bytes.
OpFacts op_facts(const StepIR& ir, const Op& op, int64_t rank);

// Every op of stage graph `g` (run by `rank`) with its corrections; empty when the topology has
// no correction table (every op then keeps its modeled time and starts at once).
std::vector<OpOverhead> stage_overheads(const StepIR& ir, const StepGraph& g, int64_t rank);

}  // namespace paralab::sim
