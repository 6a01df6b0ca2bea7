// paralab — communication timed from its last member's arrival: a measured call's interval
// includes the time its rank waited for the others; the simulator starts a call when every
// member has arrived. Shared by the breakdown (finalize), in-situ calibration and validate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ir/step_ir.hpp"
#include "results/step_result.hpp"

namespace paralab {

// A measured communication op's interval includes the time it waited for the other side (a
// receive posted long before the send, a collective's early members). The simulator starts a
// transfer when both sides are ready and a collective when every member has arrived (that wait
// is idle time, not communication). This moves each communication op's start to the latest
// start among the ops it must meet (the peer's matching send/recv by tag; the group's members'
// same collective, matched across stages by tag and occurrence), never past its end. Returns
// how many ops moved. Step-level figures are not recomputed. On a simulated result (one
// representative per stage, transfers and cross-stage calls started together) nothing moves.
int64_t align_comm_starts(StepResult& result, const StepIR& ir);

// For each op of `result`: the index of the other end of its transfer (the peer's receive of
// a send, the peer's send of a receive, matched by pipeline tag), SIZE_MAX for other ops and
// for ends whose peer the result lacks. It depends on which ops ran, not on their times.
std::vector<size_t> transfer_partners(const StepResult& result, const StepIR& ir);

// align_comm_starts with the transfer partners already found (for callers that also use them).
int64_t align_comm_starts(StepResult& result, const StepIR& ir, const std::vector<size_t>& partners);

}  // namespace paralab
