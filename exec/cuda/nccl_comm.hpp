// paralab exec/cuda — NCCL communicators: bootstrap over the executor's Transport (MPI, or the
// in-process thread world of `--gpus N`), asynchronous enqueue of every IR collective and
// transfer on a CUDA stream, a blocking GroupComm over them for verification and tests, and a
// process-wide registry so a failure can abort every communicator (ncclCommAbort) before the
// job is torn down. Host-only header.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exec/comm.hpp"

namespace paralab::exec::cuda {

// One communicator of this rank (a RankPlan slot or a pipeline edge). Groups of one member have
// no NCCL communicator: their collectives are device copies.
struct Comm {
  std::unique_ptr<GroupComm> control;  // the Transport's split: members, control all-reduce
  ncclComm_t nccl = nullptr;
  int size = 1, index = 0;
  std::vector<int64_t> members;  // world ranks in communicator order
  std::string label;
};

// Collective over `world` (every rank calls it, in the same order, with color = the
// communicator's first world rank or -1 when not a member): splits a control communicator, and
// for two or more members the first one creates an ncclUniqueId, broadcasts it over the control
// communicator (NCCL's documented bootstrap: any CPU channel), and every member joins with
// ncclCommInitRank on the current device. Returns null when this rank is not a member.
std::unique_ptr<Comm> create_comm(Transport& world, const std::vector<int64_t>& members, int64_t rank,
                                  const std::string& label);

// Asynchronous on `stream` (nothing waits on the host). Counts are elements of `t`; in place
// when the IR's conventions say so (recv == send, all-gather from recv + index*count,
// reduce-scatter into send + index*count).
void enqueue_all_reduce(const Comm& c, const void* send, void* recv, int64_t count, DType t, ReduceOp op,
                        cudaStream_t stream);
void enqueue_all_gather(const Comm& c, const void* send, void* recv, int64_t count, DType t, cudaStream_t stream);
void enqueue_reduce_scatter(const Comm& c, const void* send, void* recv, int64_t count, DType t, ReduceOp op,
                            cudaStream_t stream);
void enqueue_all_to_all(const Comm& c, const void* send, void* recv, int64_t count, DType t, cudaStream_t stream);
void enqueue_broadcast(const Comm& c, void* buf, int64_t count, DType t, int root, cudaStream_t stream);
// A send to position `to` and/or a receive from `from` (-1: none), grouped (ncclGroupStart/End)
// when both, so a ring exchange cannot deadlock.
void enqueue_send_recv(const Comm& c, const void* send, int64_t send_bytes, int to, void* recv, int64_t recv_bytes,
                       int from, cudaStream_t stream);

// Throws CallError when NCCL reports an asynchronous error on the communicator.
void check_async(const Comm& c);

// The blocking GroupComm of a communicator (verification's self-checks, tests): each call runs
// on a private stream and waits for it through the WaitPolicy (watchdog, cancellation).
std::unique_ptr<GroupComm> make_blocking_comm(const Comm& c, int device);

// Registry of live NCCL communicators of this process; abort_all_comms() calls ncclCommAbort on
// each (failure path: before MPI_Abort / process exit), so no peer keeps waiting in NCCL.
void register_comm(ncclComm_t c);
void unregister_comm(ncclComm_t c);
void abort_all_comms();

}  // namespace paralab::exec::cuda
