// paralab exec/cuda — one process driving every GPU of a node (`paralab execute --backend cuda
// --gpus N`, no mpirun): N ranks as threads of this process, thread r bound to CUDA device r.
// The Transport of each thread is rank r of an in-process world: barriers, splits (control
// communicators used to broadcast NCCL unique ids and to compare collective sequences),
// integer all-reduces and the result gather meet in shared memory. NCCL communicators are then
// created per thread with ncclCommInitRank, exactly as across processes.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "exec/comm.hpp"

namespace paralab::exec::cuda {

// The n Transports of an in-process world (index = rank). They share state; keep them alive
// until every thread is done. abort(code) aborts every NCCL communicator of the process and
// ends the process with `code` (the other ranks are threads of it).
std::vector<std::unique_ptr<Transport>> make_thread_worlds(int n);

// Runs body(world) for ranks 0..n-1 on n threads, thread r bound to CUDA device r (the CUDA
// backend picks it up); returns the largest return value. Throws ExecError when the machine
// has fewer than n CUDA devices or none.
int run_rank_threads(int n, const std::function<int(Transport& world)>& body);

}  // namespace paralab::exec::cuda
