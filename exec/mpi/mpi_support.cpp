// paralab exec/mpi — the MPI helpers the transport and its communicators share (see
// mpi_support.hpp).
#include "exec/mpi/mpi_support.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <string>
#include <thread>

#include "exec/core_turns.hpp"
#include "exec/error.hpp"
#include "exec/mpi/mpi_transport.hpp"
#include "kernels/dtype.hpp"

namespace paralab::exec::mpi_detail {

int world_rank_or_minus1() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (!init || fin) return -1;
  int r = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

namespace {

// ---- 16-bit floating types: MPI has none, so a 2-byte type with user reduction ops --------
template <float (*Load)(uint16_t), uint16_t (*Store)(float), bool kMax>
void reduce16(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = Load(a[i]), y = Load(b[i]);
    b[i] = Store(kMax ? (x > y || x != x ? x : y) : x + y);
  }
}

}  // namespace

void MpiTypes::create() {
  PARALAB_MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &half16));
  PARALAB_MPI_CHECK(MPI_Type_commit(&half16));
  using kernels::bf16_bits_to_f32;
  using kernels::f16_bits_to_f32;
  using kernels::f32_to_bf16_bits;
  using kernels::f32_to_f16_bits;
  PARALAB_MPI_CHECK(MPI_Op_create(&reduce16<bf16_bits_to_f32, f32_to_bf16_bits, false>, 1, &bf16_sum));
  PARALAB_MPI_CHECK(MPI_Op_create(&reduce16<bf16_bits_to_f32, f32_to_bf16_bits, true>, 1, &bf16_max));
  PARALAB_MPI_CHECK(MPI_Op_create(&reduce16<f16_bits_to_f32, f32_to_f16_bits, false>, 1, &f16_sum));
  PARALAB_MPI_CHECK(MPI_Op_create(&reduce16<f16_bits_to_f32, f32_to_f16_bits, true>, 1, &f16_max));
  void* attr = nullptr;
  int flag = 0;
  PARALAB_MPI_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &attr, &flag));
  if (flag && attr) tag_ub = *static_cast<int*>(attr);
}

void MpiTypes::destroy() {
  for (MPI_Op* op : {&bf16_sum, &bf16_max, &f16_sum, &f16_max})
    if (*op != MPI_OP_NULL) MPI_Op_free(op);
  if (half16 != MPI_DATATYPE_NULL) MPI_Type_free(&half16);
}

int to_int_count(int64_t n, const char* what) {
  if (n < 0 || n > INT_MAX)
    throw ExecError(world_rank_or_minus1(), std::string(what) + ": " + std::to_string(n) +
                                                " elements exceed MPI's int count limit");
  return static_cast<int>(n);
}

// Polling, backoff, core turns and doorbells: mpi_support.hpp.
void wait_all(int n, MPI_Request* reqs, const WaitPolicy& w, const GroupBells& bells) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  constexpr double kSpinS = kPollSpinUs * 1e-6;
  constexpr int64_t kMaxSleepUs = 100;
  bells.ring_peers();
  auto spin_from = t0;
  int64_t sleep_us = 20;
  double spun = 0;
  for (int64_t iter = 0;; ++iter) {
    // Read before the test: a ring between the test and the sleep then ends the sleep at once.
    const uint32_t heard = bells.mine ? Doorbells::heard(*bells.mine) : 0;
    int done = 0;
    PARALAB_MPI_CHECK(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE));
    if (done) return;
    if (iter % 32 != 0 && spun < kSpinS) continue;
    const auto now = clock::now();
    spun = std::chrono::duration<double>(now - spin_from).count();
    if (w.yield_turn()) {
      // Core turns: polling is one more turn in the node's queue, never a sleep.
    } else if (spun >= kSpinS) {
      if (!bells.mine) {
        std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
      } else if (Doorbells::sleep(*bells.mine, heard, sleep_us)) {
        spin_from = clock::now();  // a peer arrived: poll as if just arrived
        spun = 0;
        sleep_us = 20;
        w.check(std::chrono::duration<double>(spin_from - t0).count());
        continue;
      }
      sleep_us = std::min<int64_t>(sleep_us * 2, kMaxSleepUs);
    }
    w.check(std::chrono::duration<double>(now - t0).count());
  }
}

}  // namespace paralab::exec::mpi_detail
