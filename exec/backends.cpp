// paralab exec — backend registry.
#include "exec/backends.hpp"

#include "exec/cpu/cpu_backend.hpp"
#include "exec/error.hpp"
#if defined(PARALAB_EXEC_CUDA)
#include "exec/cuda/cuda_backend.hpp"  // exec/cuda/: make_cuda_backend(const StepIR&)
#endif

namespace paralab::exec {

std::vector<std::string> backend_names() {
  std::vector<std::string> out{"cpu"};
#if defined(PARALAB_EXEC_CUDA)
  out.push_back("cuda");
#endif
  return out;
}

std::unique_ptr<Backend> make_backend(std::string_view name, const StepIR& ir, int64_t rank) {
  if (name == "cpu") return make_cpu_backend(ir);
#if defined(PARALAB_EXEC_CUDA)
  if (name == "cuda") return make_cuda_backend(ir);
#endif
  std::string have;
  for (const auto& n : backend_names()) have += (have.empty() ? "" : ", ") + n;
  if (name == "cuda")
    throw ExecError(rank, "the cuda backend is not built into this binary (exec/cuda/); available: " + have);
  throw ExecError(rank, "unknown backend '" + std::string(name) + "'; available: " + have);
}

}  // namespace paralab::exec
