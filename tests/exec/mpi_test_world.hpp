// tests/exec — the MPI world of the MPI test binary (set by mpi_main.cpp).
#pragma once

#include "exec/comm.hpp"

namespace paralab::exec::test {
extern Transport* g_world;
}
