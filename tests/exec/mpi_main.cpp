// tests/exec — main of the MPI test binary: MPI (through the executor's transport) around a
// Catch2 session; every rank runs the same test cases in the same order (they are collective)
// and the job fails if any rank fails.
#include "tests/catch_session.hpp"

#include "exec/mpi/mpi_transport.hpp"
#include "mpi_test_world.hpp"

namespace paralab::exec::test {
Transport* g_world = nullptr;  // the test binary's world (tests only)
}

int main(int argc, char** argv) {
  // The harness is a command line: it reads PARALAB_CORE_TURNS as paralab does (the core-turn
  // tests run this binary under each mode).
  auto world = paralab::exec::make_mpi_transport(&argc, &argv, paralab::exec::CoreTurnsMode::from_environment(), paralab::exec::DoorbellMode::from_environment());
  paralab::exec::test::g_world = world.get();
  int64_t failed = paralab::test::run_catch_session(argc, argv);
  world->all_reduce(&failed, 1, paralab::ReduceOp::max);
  paralab::exec::test::g_world = nullptr;
  world->finalize();
  return failed ? 1 : 0;
}
