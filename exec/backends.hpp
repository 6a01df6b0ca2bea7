// paralab exec — the backends this build has, by name ("cpu", "cuda"). A new backend is a
// folder under exec/ implementing exec/backend.hpp and one row in backends.cpp.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "exec/backend.hpp"

namespace paralab::exec {

// Throws ExecError naming the backends that exist when `name` is unknown or not built.
std::unique_ptr<Backend> make_backend(std::string_view name, const StepIR& ir, int64_t rank);
std::vector<std::string> backend_names();  // built into this binary

}  // namespace paralab::exec
