// paralab exec — the MPI world (Open MPI / MPICH): MPI_THREAD_MULTIPLE, errors returned (never
// the default abort-without-a-message handler) and turned into ExecErrors by PARALAB_MPI_CHECK,
// communicators split from MPI_COMM_WORLD, nonblocking collectives polled with backoff so the
// runtime's watchdog can interrupt a wait, a sleeping poller woken by its host peers' doorbells. Only built when CMake finds MPI (PARALAB_HAVE_MPI).
#pragma once

#include <memory>

#include "exec/comm.hpp"
#include "exec/core_turns.hpp"
#include "exec/doorbells.hpp"

namespace paralab::exec {

// Initializes MPI (MPI_Init_thread with MPI_THREAD_MULTIPLE) unless already initialized, and
// finalizes it in finalize(). Throws ExecError if the library lacks MPI_THREAD_MULTIPLE, or if
// the ranks of a host were given different core-turn modes. `turns`: when the host's ranks take
// core turns (the command line parses PARALAB_CORE_TURNS into it); `bells`: whether the ranks
// of a host wake each other's sleeping pollers (exec/doorbells.hpp; PARALAB_DOORBELLS).
std::unique_ptr<Transport> make_mpi_transport(int* argc, char*** argv, CoreTurnsMode turns, DoorbellMode bells);

// Throws ExecError("MPI call `expr` failed at file:line: <MPI error string>") naming the
// calling process's world rank. Use through PARALAB_MPI_CHECK.
void mpi_check(int rc, const char* expr, const char* file, int line);

}  // namespace paralab::exec

#define PARALAB_MPI_CHECK(expr) ::paralab::exec::mpi_check((expr), #expr, __FILE__, __LINE__)
