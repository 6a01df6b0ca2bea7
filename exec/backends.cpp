// paralab exec — backend registry: the CPU backend built in, the CUDA backend a plugin loaded
// when asked for (exec/cuda_plugin.hpp).
#include "exec/backends.hpp"

#include "exec/cpu/cpu_backend.hpp"
#include "exec/cuda_plugin.hpp"
#include "exec/error.hpp"

namespace paralab::exec {

std::vector<std::string> backend_names() {
  std::vector<std::string> out{"cpu"};
  if (!cuda_plugin_path().empty()) out.push_back("cuda");
  return out;
}

std::unique_ptr<Backend> make_backend(std::string_view name, const StepIR& ir, int64_t rank) {
  if (name == "cpu") return make_cpu_backend(ir);
  if (name == "cuda") return cuda_plugin(rank).make_backend(ir);
  std::string have;
  for (const auto& n : backend_names()) have += (have.empty() ? "" : ", ") + n;
  throw ExecError(rank, "unknown backend '" + std::string(name) + "'; available: " + have);
}

}  // namespace paralab::exec
