// Catch2's implementation, compiled once and linked into every test executable: each main
// (catch_main.cpp, gpu_main.cpp, tests/exec/mpi_main.cpp) includes only the header. Catch2 v2
// puts its implementation in the one translation unit defining CATCH_CONFIG_RUNNER.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_session.hpp"

namespace paralab::test {
int run_catch_session(int argc, char** argv) { return Catch::Session().run(argc, argv); }
}  // namespace paralab::test
