// paralab exec/cpu — the CPU backend: host memory, Eigen GEMMs and the CPU twins of kernels/,
// communicators from the Transport (MPI), the steady clock. One process (MPI rank) per
// modeled device; ops run synchronously on the runtime's stream threads.
#pragma once

#include <memory>

#include "exec/backend.hpp"

namespace paralab::exec {

std::unique_ptr<Backend> make_cpu_backend(const StepIR& ir);

}  // namespace paralab::exec
