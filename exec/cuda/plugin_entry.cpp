// paralab exec/cuda — the plugin's one exported symbol (exec/cuda_plugin.hpp): the table the
// main binary loads at run time. Everything else in the plugin has hidden visibility.
#include "exec/cuda/cuda_backend.hpp"
#include "exec/cuda/thread_world.hpp"
#include "exec/cuda_plugin.hpp"

extern "C" __attribute__((visibility("default"))) const paralab::exec::CudaPlugin* paralab_cuda_plugin() {
  static const paralab::exec::CudaPlugin table{paralab::exec::kCudaPluginAbi, &paralab::exec::make_cuda_backend,
                                               &paralab::exec::cuda::run_rank_threads};
  return &table;
}
