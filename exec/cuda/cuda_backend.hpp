// paralab exec/cuda — the CUDA backend (docs/cuda_backend.md): each IR stream is a CUDA stream
// driven by the runtime's worker for it; GEMMs run on cuBLASLt, the memory-bound ops on the
// kernels/ CUDA launchers, communication on NCCL (one communicator per group and stream, one per
// pipeline edge); CUDA events carry the IR's cross-stream dependencies and time every op.
// Plain C++ header: exec/backends.cpp includes it without CUDA headers.
#pragma once

#include <memory>
#include <string>

#include "exec/backend.hpp"

namespace paralab::exec {

// Fails in setup() with a clear ExecError when no CUDA device or driver is usable.
std::unique_ptr<Backend> make_cuda_backend(const StepIR& ir);

namespace cuda {

// The CUDA device of this thread's rank: set by run_rank_threads (--gpus N); -1 (default): the
// node-local rank of an MPI job (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID)
// modulo the visible devices.
void set_thread_device(int device);
int thread_device();

// Whether a CUDA device and driver are usable; otherwise `why` says what is missing.
bool cuda_available(std::string* why, int* device_count);

}  // namespace cuda
}  // namespace paralab::exec
