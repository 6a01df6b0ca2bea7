// paralab exec — the CUDA backend as a plugin loaded at run time (docs/cuda_backend.md,
// "Loading"): `execute` and `calibrate --backend cuda` dlopen libparalab_cuda_backend.so, so no
// other command maps CUDA, cuBLAS or NCCL into the process. The plugin is built from exec/cuda/
// with its own copies of what it needs (hidden visibility); what crosses is this table.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "exec/backend.hpp"
#include "exec/comm.hpp"

namespace paralab::exec {

// Bumped when the table or a type crossing it changes: a plugin of another version is refused.
inline constexpr int kCudaPluginAbi = 1;

struct CudaPlugin {
  int abi = kCudaPluginAbi;
  std::unique_ptr<Backend> (*make_backend)(const StepIR& ir) = nullptr;
  // One process driving n GPUs (execute --gpus n): body(world) on n threads, one per device.
  int (*run_rank_threads)(int n, const std::function<int(Transport& world)>& body) = nullptr;
};

// The plugin's file: $PARALAB_CUDA_BACKEND if set, else the first that exists of the build
// tree's (where this binary was built) and libparalab_cuda_backend.so beside the executable or
// in ../lib/paralab/ from it; empty when none does.
std::string cuda_plugin_path();

// Loads the plugin once (thread-safe). Throws ExecError(rank) naming the file and what the
// dynamic loader said (a missing libcudart, libcublasLt or libnccl, a missing file, another
// ABI) when it cannot.
const CudaPlugin& cuda_plugin(int64_t rank = 0);

}  // namespace paralab::exec

// The plugin's one exported symbol.
extern "C" const paralab::exec::CudaPlugin* paralab_cuda_plugin();
