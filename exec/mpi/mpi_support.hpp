// paralab exec/mpi — what the MPI transport and its group communicators share (internal to
// exec/mpi): the 2-byte type and user reduction ops for bf16/f16, MPI's int counts, the world
// rank for error messages, and the polled wait for nonblocking requests.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "exec/comm.hpp"
#include "exec/doorbells.hpp"

namespace paralab::exec::mpi_detail {

// This process's rank in MPI_COMM_WORLD, or -1 before MPI_Init or after MPI_Finalize.
int world_rank_or_minus1();

// MPI has no 16-bit floating types: a 2-byte type with user reduction ops (sum and max in fp32,
// one rounding back), and the tag bound of this MPI.
struct MpiTypes {
  MPI_Datatype half16 = MPI_DATATYPE_NULL;  // bf16 and f16 storage (2 bytes)
  MPI_Op bf16_sum = MPI_OP_NULL, bf16_max = MPI_OP_NULL, f16_sum = MPI_OP_NULL, f16_max = MPI_OP_NULL;
  int tag_ub = 32767;

  // Commits the 2-byte type, creates the reduction ops and reads MPI_TAG_UB (after MPI_Init).
  void create();
  // Frees what create() made (before MPI_Finalize).
  void destroy();
  [[nodiscard]] MPI_Datatype type(DType t) const {
    switch (t) {
      case DType::f32: return MPI_FLOAT;
      case DType::i32: return MPI_INT32_T;
      case DType::bf16:
      case DType::f16: return half16;
      case DType::fp8:
      case DType::u8: return MPI_UINT8_T;
    }
    return MPI_BYTE;
  }
  [[nodiscard]] MPI_Op op(DType t, ReduceOp r) const {
    switch (t) {
      case DType::bf16: return r == ReduceOp::sum ? bf16_sum : bf16_max;
      case DType::f16: return r == ReduceOp::sum ? f16_sum : f16_max;
      default: return r == ReduceOp::sum ? MPI_SUM : MPI_MAX;
    }
  }
};

// n as MPI's int count; throws ExecError naming `what` beyond INT_MAX.
int to_int_count(int64_t n, const char* what);

// Polls requests to completion. Nonblocking collectives (Open MPI's libnbc) advance one round
// per test on each side, so for the first 0.5 ms both sides busy-poll without yielding (a
// sched_yield on a loaded host gives the core away for a whole time slice: milliseconds per
// round); after that the poller sleeps 20 us, growing to at most 100 us. The spin window sets
// what a late peer costs: on cpu-tp2 (2 ranks, 2 cores) a collective whose members arrived
// within 0.1 ms of each other ended 13 us (median) after the last arrival, one whose early
// member had gone to sleep 350 us after it (several rounds at a sleeper's pace); a 0.5 ms
// window took the step's median over 8 runs from 79 to 54 ms (cpu-tp2-dp2-zero3: 68 to 54 ms;
// cpu-pp4, cpu-dp2-zero2, cpu-cp2 unchanged), 2 ms no further (docs/executor.md). The sleep
// cap bounds what a round costs once a late peer arrives (with a 1 ms cap, 2-rank TP
// reduce-scatters measured 2.4 ms against 0.09 ms when both sides arrive together:
// bench/results/validate_cpu.md), while a long wait (a pipeline bubble, a gradient reduction
// waiting for the slowest replica) costs a wake-up per 100 us, a few % of a core.
// With core turns (more ranks than cores: exec/core_turns.hpp) the poller holds its op's turn
// and, whenever another thread of the node waits for one, hands it over and queues again
// (every 32 tests in the spin window, every test after it); it never sleeps, since it only
// polls when no one else wants the core.
// With doorbells (exec/doorbells.hpp) the caller has just posted its side of the call, so it
// first rings the group's other members on its host, and a poller past its window sleeps on
// its own bell: a peer's arrival wakes it at once, and it polls from then on as one that had
// just arrived (a fresh spin window). Peers on other hosts ring nothing.
// The wait policy is consulted throughout (watchdog, failure of another stream), with the
// time since the call began.
void wait_all(int n, MPI_Request* reqs, const WaitPolicy& w, const GroupBells& bells);

}  // namespace paralab::exec::mpi_detail
