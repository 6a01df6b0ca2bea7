// paralab plan under mpirun (docs/planner.md, "Sweeps on MPI"): every rank runs the same
// planner; a batch of simulations is sharded across the ranks (rank r of n simulates jobs
// i = r, r + n, ... on its own threads) and the results are gathered and broadcast, so every
// rank sees every result and takes the same decisions, and rank 0 prints exactly what one
// process prints.
#pragma once

#include <string>
#include <vector>

#include "exec/comm.hpp"
#include "plan/planner.hpp"

namespace paralab::cli {

JobRunner mpi_runner(exec::Transport& world, int threads);

// Every rank's blob on every rank (index = rank): gather_to_root, then a broadcast.
std::vector<std::string> all_gather(exec::Transport& world, exec::GroupComm& all, const std::string& blob);

// A planned layout's figures as bytes and back, exactly (CBOR).
std::string to_bytes(const std::vector<PlannedLayout>& v);
std::vector<PlannedLayout> from_bytes(const std::string& b);

}  // namespace paralab::cli
