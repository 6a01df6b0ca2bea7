// paralab exec/cuda — which NCCL communicators the job needs, which one each op uses, and which
// cross-stream dependencies need a cudaStreamWaitEvent. Pure planning (no CUDA), so the CPU
// tests check it on every scenario.
//
// NCCL's rule: the operations of a communicator must be issued in the same order by all of its
// members, and one communicator is never used by two host threads at once. Streams of one rank
// are driven by different threads and may talk to the same peers, so:
//  * collectives use one communicator per (group kind, stream) — the RankPlan's slots, exactly
//    as the CPU backend's MPI communicators; the executor checks before the step that every
//    member issues the same collective sequence on each (check_collective_sequences);
//  * `sendrecv` (the context-parallel ring) uses the slot of (group kind, p2p): only the
//    cp_comm stream issues them, each one a grouped ncclSend + ncclRecv (ncclGroupStart/End),
//    the same sequence on every ring member;
//  * pipeline `send`/`recv` use one two-member communicator per *directed edge*: (group kind,
//    data-flow offset d, sender position i) connects position i (which only sends on it, from
//    pp_send) to position i + d (which only receives on it, on pp_recv). NCCL matches the k-th
//    send with the k-th receive of a communicator, so the sender's sends and the receiver's
//    receives on every edge must carry the same (bytes, tag) sequence: check_p2p_order proves
//    it for the whole job before anything runs (the IR's tags are unique per direction,
//    micro-batch and receiving virtual stage, so equal sequences mean every transfer meets its
//    partner).
// Why this cannot deadlock: each communicator is used by exactly one stream on each member,
// in that stream's IR order, so NCCL's per-communicator serialization adds no ordering the IR
// does not already have; a send completes only when its receive runs (rendezvous), which is
// how the simulator matches transfers, and the simulator completes every graph (it reports a
// deadlock otherwise); the stream-ordered allocator is configured not to add waits between
// streams (docs/cuda_backend.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exec/plan.hpp"

namespace paralab::exec::cuda {

struct CommSpec {
  enum class Kind : uint8_t { slot, edge };
  Kind kind = Kind::slot;
  int slot = -1;            // slot: index into RankPlan::comms
  GroupKind group = GroupKind::pp;
  int32_t offset = 0;       // edge: data-flow offset d (+1: to the next position)
  int64_t sender = 0;       // edge: position of the sending member in its group
  [[nodiscard]] std::string label() const;
};

// Every communicator of the job, in one order on every rank: the RankPlan slots (job_comms),
// then the edges of every group kind used by send/recv, for d in {+1, -1} used, i = 0..n-1.
std::vector<CommSpec> job_nccl_comms(const StepIR& ir);

// World ranks of rank `rank`'s communicator of `spec` in communicator order (for an edge: the
// sender, then the receiver); empty when the rank is not a member.
std::vector<int64_t> comm_members(const StepIR& ir, const CommSpec& spec, int64_t rank);

// Which communicator each op of this rank uses and whom it addresses there.
struct OpComm {
  int comm = -1;        // index into job_nccl_comms (-1: not a communication op)
  int send_peer = -1;   // position in that communicator (-1: none)
  int recv_peer = -1;
};
std::vector<OpComm> plan_op_comms(const RankPlan& plan, const std::vector<CommSpec>& specs);

// Throws ExecError naming the edge and the first difference when a sender's send sequence on an
// edge differs from the receiver's receive sequence, or when one edge is used by two streams.
void check_p2p_order(const StepIR& ir);

// The cross-stream waits each op needs: the IR's deps minus those already implied by earlier
// waits of its stream (a completed event of op x on stream X means every op before x on X is
// done). waits[op] lists the deps to wait on, latest first.
struct WaitPlan {
  std::vector<std::vector<OpId>> waits;
  int64_t ir_deps = 0, kept = 0;
};
WaitPlan plan_waits(const StepGraph& g);

}  // namespace paralab::exec::cuda
