// paralab exec — MPI transport and group communicators.
#include "exec/mpi/mpi_transport.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "exec/core_turns.hpp"
#include "exec/doorbells.hpp"
#include "exec/error.hpp"
#include "exec/mpi/mpi_support.hpp"
#include "kernels/dtype.hpp"

namespace paralab::exec {

namespace {

using mpi_detail::MpiTypes;
using mpi_detail::to_int_count;
using mpi_detail::wait_all;
using mpi_detail::world_rank_or_minus1;

class MpiComm final : public GroupComm {
 public:
  MpiComm(MPI_Comm c, const MpiTypes& types, std::vector<int64_t> members, std::string label)
      : comm_(c), types_(types), members_(std::move(members)), label_(std::move(label)) {
    PARALAB_MPI_CHECK(MPI_Comm_size(comm_, &size_));
    PARALAB_MPI_CHECK(MPI_Comm_rank(comm_, &index_));
    PARALAB_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    // The ring collectives' own communicator: their transfers never match a send_recv's.
    PARALAB_MPI_CHECK(MPI_Comm_dup(comm_, &ring_));
    PARALAB_MPI_CHECK(MPI_Comm_set_errhandler(ring_, MPI_ERRORS_RETURN));
  }
  ~MpiComm() override {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin && ring_ != MPI_COMM_NULL) MPI_Comm_free(&ring_);
    if (!fin && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  [[nodiscard]] int size() const override { return size_; }
  [[nodiscard]] int index() const override { return index_; }
  [[nodiscard]] const std::vector<int64_t>& members() const override { return members_; }
  [[nodiscard]] const std::string& label() const override { return label_; }

  void all_reduce(const void* send, void* recv, int64_t count, DType t, ReduceOp op, const WaitPolicy& w) override {
    MPI_Request r;
    PARALAB_MPI_CHECK(MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, to_int_count(count, "all_reduce"),
                                     types_.type(t), types_.op(t, op), comm_, &r));
    wait_all(1, &r, w, bells_);
  }
  // All-gather and reduce-scatter run as rings of transfers (Patarasuk & Yuan, JPDC 69(2),
  // 2009): n - 1 steps, in each every member sends one block to its successor and receives one
  // from its predecessor, so all members do the same work and end at the same step, and the
  // cost is the ring the simulator models. libnbc's are not symmetric: its reduce-scatter
  // reduces everything on communicator rank 0 and scatters from there, and on a 2-core host
  // its all-gathers and reduce-scatters ended up to 2-3x later on rank 0 than on the other
  // member (timed from the last arrival); the rings are symmetric, and faster too.
  void all_gather(const void* send, void* recv, int64_t count, DType t, const WaitPolicy& w) override {
    const int64_t block = count * bytes_of(t);
    auto* out = static_cast<char*>(recv);
    if (send != out + index_ * block) std::memcpy(out + index_ * block, send, static_cast<size_t>(block));
    // Step k: forward block (index - k), receive block (index - k - 1).
    for (int k = 0; k + 1 < size_; ++k)
      ring_step(out + wrap(index_ - k) * block, out + wrap(index_ - k - 1) * block, block, "all_gather", w);
  }
  void reduce_scatter(const void* send, void* recv, int64_t count, DType t, ReduceOp op, const WaitPolicy& w) override {
    const int64_t block = count * bytes_of(t);
    const auto* in = static_cast<const char*>(send);
    if (size_ == 1) {
      std::memcpy(recv, in, static_cast<size_t>(block));
      return;
    }
    // Step k: forward the partial sum of block (index - k - 1) (at step 0 this member's own
    // share), receive the predecessor's partial of block (index - k - 2) and add this member's
    // share to it. After n - 1 steps the partial in hand is block index, complete.
    // The scratch only grows: a ZeRO step alternates small and large calls, and a resize back
    // up value-initializes the regrown part (cpu-dp2-zero2's 788 KB bf16 reduce-scatters
    // zeroed ~720 KB, 20-43 us, before each). The last step receives into `recv` itself when
    // it lies outside the input (saves a block's copy, 27-35 us for 394 KB on the build host).
    if (scratch_.size() < static_cast<size_t>(2 * block)) scratch_.resize(static_cast<size_t>(2 * block));
    char* parts[2] = {scratch_.data(), scratch_.data() + block};
    auto* dst = static_cast<char*>(recv);
    const auto at = reinterpret_cast<uintptr_t>(dst), lo = reinterpret_cast<uintptr_t>(in);
    const bool direct = at + static_cast<uintptr_t>(block) <= lo || at >= lo + static_cast<uintptr_t>(size_ * block);
    const int c = to_int_count(count, "reduce_scatter");
    for (int k = 0; k + 1 < size_; ++k) {
      const char* out = k == 0 ? in + wrap(index_ - 1) * block : parts[(k + 1) % 2];
      char* got = direct && k + 2 == size_ ? dst : parts[k % 2];
      ring_step(out, got, block, "reduce_scatter", w);
      PARALAB_MPI_CHECK(MPI_Reduce_local(in + wrap(index_ - k - 2) * block, got, c, types_.type(t), types_.op(t, op)));
    }
    if (!direct) std::memcpy(dst, parts[(size_ - 2) % 2], static_cast<size_t>(block));
  }
  void all_to_all(const void* send, void* recv, int64_t count, DType t, const WaitPolicy& w) override {
    MPI_Request r;
    const int n = to_int_count(count, "all_to_all");
    PARALAB_MPI_CHECK(MPI_Ialltoall(send, n, types_.type(t), recv, n, types_.type(t), comm_, &r));
    wait_all(1, &r, w, bells_);
  }
  void broadcast(void* buf, int64_t count, DType t, int root, const WaitPolicy& w) override {
    MPI_Request r;
    PARALAB_MPI_CHECK(MPI_Ibcast(buf, to_int_count(count, "broadcast"), types_.type(t), root, comm_, &r));
    wait_all(1, &r, w, bells_);
  }
  void send_recv(const void* send, int64_t send_bytes, int to, void* recv, int64_t recv_bytes, int from,
                 uint32_t tag, const WaitPolicy& w) override {
    MPI_Request r[2];
    int n = 0;
    const int mtag = static_cast<int>(tag % (static_cast<uint32_t>(types_.tag_ub) + 1u));
    if (from >= 0)
      PARALAB_MPI_CHECK(MPI_Irecv(recv, to_int_count(recv_bytes, "recv"), MPI_BYTE, from, mtag, comm_, &r[n++]));
    if (to >= 0)
      PARALAB_MPI_CHECK(MPI_Isend(send, to_int_count(send_bytes, "send"), MPI_BYTE, to, mtag, comm_, &r[n++]));
    if (n) wait_all(n, r, w, bells_);
  }
  void control_all_reduce(int64_t* values, int n, ReduceOp op) override {
    PARALAB_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_INT64_T, op == ReduceOp::sum ? MPI_SUM : MPI_MAX, comm_));
  }
  // The world ranks of this communicator's members, by communicator rank.
  [[nodiscard]] std::vector<int> world_ranks() const {
    MPI_Group mine, world;
    PARALAB_MPI_CHECK(MPI_Comm_group(comm_, &mine));
    PARALAB_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    std::vector<int> in(static_cast<size_t>(size_)), out(static_cast<size_t>(size_));
    for (int i = 0; i < size_; ++i) in[static_cast<size_t>(i)] = i;
    PARALAB_MPI_CHECK(MPI_Group_translate_ranks(mine, size_, in.data(), world, out.data()));
    MPI_Group_free(&mine);
    MPI_Group_free(&world);
    return out;
  }
  void set_bells(GroupBells b) { bells_ = std::move(b); }

 private:
  // Sends `out` to the successor and receives `in` from the predecessor on the ring's own
  // communicator, polled like every call.
  void ring_step(const void* out, void* in, int64_t bytes, const char* what, const WaitPolicy& w) {
    const int n = to_int_count(bytes, what);
    MPI_Request r[2];
    PARALAB_MPI_CHECK(MPI_Irecv(in, n, MPI_BYTE, wrap(index_ - 1), 0, ring_, &r[0]));
    PARALAB_MPI_CHECK(MPI_Isend(out, n, MPI_BYTE, wrap(index_ + 1), 0, ring_, &r[1]));
    wait_all(2, r, w, bells_);
  }
  [[nodiscard]] int wrap(int i) const { return ((i % size_) + size_) % size_; }

  MPI_Comm comm_, ring_ = MPI_COMM_NULL;
  const MpiTypes& types_;
  std::vector<char> scratch_;  // reduce-scatter's two partial blocks, kept between calls
  int size_ = 0, index_ = 0;
  std::vector<int64_t> members_;
  std::string label_;
  GroupBells bells_;  // set by the transport after construction (set_bells)
};

class MpiTransport final : public Transport {
 public:
  MpiTransport(int* argc, char*** argv, CoreTurnsMode turns, DoorbellMode bells) {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
      // Open MPI's nonblocking all-reduce (libnbc) takes a binomial reduce + broadcast for
      // small buffers, whose root (communicator rank 0) sees the call end well after the other
      // members (about 4x later, from the last arrival). Its ring is symmetric, as the
      // simulator's ring all-reduce and NCCL's are.
      // Read by Open MPI at init; a value the user set wins; other MPI libraries ignore it.
      setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0);
      int provided = 0;
      if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
        throw ExecError(-1, "MPI_Init_thread failed");
      owns_ = true;
      if (provided < MPI_THREAD_MULTIPLE) {
        int r = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
        throw ExecError(r, "the MPI library does not provide MPI_THREAD_MULTIPLE (got level " +
                               std::to_string(provided) + "); the executor runs streams on threads");
      }
    }
    PARALAB_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    PARALAB_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    PARALAB_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
    MPI_Comm local;
    PARALAB_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local));
    PARALAB_MPI_CHECK(MPI_Comm_size(local, &local_size_));
    node_cores_ = count_node_cores(local);
    open_core_turns(local, turns);
    if (bells.on) open_doorbells(local);
    PARALAB_MPI_CHECK(MPI_Comm_free(&local));
    types_.create();
  }
  CoreTurns* core_turns() override { return turns_ ? &*turns_ : nullptr; }
  [[nodiscard]] bool doorbells() const override { return bells_.has_value(); }
  ~MpiTransport() override {
    finalize();
    // A world this transport did not initialize stays up: the window goes now.
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) close_host_windows();
  }

  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return size_; }
  [[nodiscard]] std::string name() const override { return "mpi"; }
  [[nodiscard]] int local_size() const override { return local_size_; }
  [[nodiscard]] int node_cores() const override { return node_cores_; }
  void barrier() override { PARALAB_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD)); }

  std::unique_ptr<GroupComm> split(int color, int key, std::vector<int64_t> members, std::string label) override {
    MPI_Comm c = MPI_COMM_NULL;
    PARALAB_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color < 0 ? MPI_UNDEFINED : color, key, &c));
    const int slot = splits_++;  // every rank counts every split (collective over the world)
    if (c == MPI_COMM_NULL) return nullptr;
    auto comm = std::make_unique<MpiComm>(c, types_, std::move(members), std::move(label));
    if (bells_) {
      GroupBells b;
      b.mine = &bells_->bell(local_of_world_[static_cast<size_t>(rank_)], slot);
      for (const int w : comm->world_ranks())
        if (const int l = local_of_world_[static_cast<size_t>(w)]; w != rank_ && l >= 0) b.peers.push_back(&bells_->bell(l, slot));
      comm->set_bells(std::move(b));
    }
    if (comm->size() != static_cast<int>(comm->members().size()))
      throw ExecError(rank_, "communicator " + comm->label() + " has " + std::to_string(comm->size()) +
                                 " members, the layout says " + std::to_string(comm->members().size()));
    return comm;
  }

  void all_reduce(int64_t* values, int n, ReduceOp op) override {
    PARALAB_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_INT64_T, op == ReduceOp::sum ? MPI_SUM : MPI_MAX,
                                    MPI_COMM_WORLD));
  }

  // Rank 0 plays kClockSyncRounds ping-pongs with each other rank in turn (the others wait in
  // a blocking receive) and sends each its Cristian estimate (exec/clock_sync.hpp).
  ClockOffset clock_offset(const std::function<double()>& now_us) override {
    constexpr int kTag = 31001;  // MPI_COMM_WORLD carries only control messages
    double mine[2] = {0, 0};
    if (rank_ == 0) {
      std::vector<double> all(2 * static_cast<size_t>(size_), 0.0);
      std::vector<ClockSample> samples(kClockSyncRounds);
      for (int peer = 1; peer < size_; ++peer) {
        for (ClockSample& s : samples) {
          s.sent_us = now_us();
          PARALAB_MPI_CHECK(MPI_Send(&s.sent_us, 1, MPI_DOUBLE, peer, kTag, MPI_COMM_WORLD));
          PARALAB_MPI_CHECK(MPI_Recv(&s.peer_us, 1, MPI_DOUBLE, peer, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
          s.back_us = now_us();
        }
        const ClockOffset o = cristian_offset(samples);
        all[2 * static_cast<size_t>(peer)] = o.offset_us;
        all[2 * static_cast<size_t>(peer) + 1] = o.error_us;
      }
      PARALAB_MPI_CHECK(MPI_Scatter(all.data(), 2, MPI_DOUBLE, mine, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    } else {
      for (int k = 0; k < kClockSyncRounds; ++k) {
        double ping = 0;
        PARALAB_MPI_CHECK(MPI_Recv(&ping, 1, MPI_DOUBLE, 0, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        const double t = now_us();
        PARALAB_MPI_CHECK(MPI_Send(&t, 1, MPI_DOUBLE, 0, kTag, MPI_COMM_WORLD));
      }
      PARALAB_MPI_CHECK(MPI_Scatter(nullptr, 2, MPI_DOUBLE, mine, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    }
    return ClockOffset{mine[0], mine[1]};
  }

  std::vector<std::string> gather_to_root(const std::string& blob) override {
    const int len = to_int_count(static_cast<int64_t>(blob.size()), "gather");
    std::vector<int> lens(rank_ == 0 ? static_cast<size_t>(size_) : 0);
    PARALAB_MPI_CHECK(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
    std::vector<int> displs(lens.size());
    int64_t total = 0;
    for (size_t i = 0; i < lens.size(); ++i) {
      displs[i] = static_cast<int>(total);
      total += lens[i];
    }
    std::string all(static_cast<size_t>(to_int_count(total, "gather")), '\0');
    PARALAB_MPI_CHECK(MPI_Gatherv(blob.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0,
                                  MPI_COMM_WORLD));
    std::vector<std::string> out;
    for (size_t i = 0; i < lens.size(); ++i) out.push_back(all.substr(static_cast<size_t>(displs[i]), static_cast<size_t>(lens[i])));
    return out;
  }

  void abort(int code) override { MPI_Abort(MPI_COMM_WORLD, code); }

  void finalize() override {
    if (!owns_ || finalized_) return;
    finalized_ = true;
    close_host_windows();
    types_.destroy();
    MPI_Finalize();
  }

 private:
  // The union of the node's ranks' CPU affinities. mpirun binds each of N <= cores ranks to a
  // core of its own (each sees 1) and binds nothing when it oversubscribes (each sees all).
  static int count_node_cores(MPI_Comm local) {
    const CpuMask mine = affinity_mask();
    CpuMask all{};
    PARALAB_MPI_CHECK(MPI_Allreduce(mine.data(), all.data(), static_cast<int>(mine.size()), MPI_UINT64_T, MPI_BOR, local));
    return std::max(1, count_cpus(all));
  }
  // With more ranks on this host than cores the job may use (node_cores_), the node's ranks
  // take core turns (exec/core_turns.hpp) kept in a window shared by the node; `mode` may ask
  // for them always, never, or a number of them.
  void open_core_turns(MPI_Comm local, CoreTurnsMode mode) {
    const int turns = mode.turns_for(local_size_, node_cores_);
    // Every rank of the node must agree (one window, one count): the least and, negated, the
    // most in one reduction.
    int mine[2] = {turns, -turns}, least[2] = {0, 0};
    PARALAB_MPI_CHECK(MPI_Allreduce(mine, least, 2, MPI_INT, MPI_MIN, local));
    if (least[0] != -least[1])
      throw ExecError(rank_, "core turns: the ranks of this host disagree (" + std::to_string(least[0]) + " to " +
                                 std::to_string(-least[1]) + " turns): set PARALAB_CORE_TURNS alike for every rank");
    if (turns < 1) return;
    turns_.emplace(host_shared(local, CoreTurns::kSharedBytes, &turns_win_), turns);
  }
  // Doorbells (exec/doorbells.hpp) when this host runs 2 to Doorbells::kMaxLocalRanks of the
  // job's ranks, and which host rank each world rank is (-1: on another host).
  void open_doorbells(MPI_Comm local) {
    local_of_world_.assign(static_cast<size_t>(size_), -1);
    std::vector<int> worlds(static_cast<size_t>(local_size_));
    PARALAB_MPI_CHECK(MPI_Allgather(&rank_, 1, MPI_INT, worlds.data(), 1, MPI_INT, local));
    for (size_t l = 0; l < worlds.size(); ++l) local_of_world_[static_cast<size_t>(worlds[l])] = static_cast<int>(l);
    if (local_size_ < 2 || local_size_ > Doorbells::kMaxLocalRanks) return;
    bells_.emplace(host_shared(local, Doorbells::kSharedBytes, &bells_win_), local_size_);
  }
  // `bytes` of zeroed memory every rank of the host maps (an MPI shared window held in *win).
  static void* host_shared(MPI_Comm local, size_t bytes, MPI_Win* win) {
    int local_rank = 0;
    PARALAB_MPI_CHECK(MPI_Comm_rank(local, &local_rank));
    void* base = nullptr;
    const MPI_Aint mine = local_rank == 0 ? static_cast<MPI_Aint>(bytes) : 0;
    PARALAB_MPI_CHECK(MPI_Win_allocate_shared(mine, 1, MPI_INFO_NULL, local, &base, win));
    MPI_Aint size = 0;
    int disp = 0;
    PARALAB_MPI_CHECK(MPI_Win_shared_query(*win, 0, &size, &disp, &base));
    if (local_rank == 0) std::memset(base, 0, bytes);
    PARALAB_MPI_CHECK(MPI_Barrier(local));
    return base;
  }
  void close_host_windows() {  // collective over the node, as every rank ends
    turns_.reset();
    bells_.reset();
    if (turns_win_ != MPI_WIN_NULL) MPI_Win_free(&turns_win_);
    if (bells_win_ != MPI_WIN_NULL) MPI_Win_free(&bells_win_);
  }

  bool owns_ = false, finalized_ = false;
  int rank_ = 0, size_ = 1, local_size_ = 1, node_cores_ = 1;
  MpiTypes types_;
  MPI_Win turns_win_ = MPI_WIN_NULL, bells_win_ = MPI_WIN_NULL;
  std::optional<CoreTurns> turns_;
  std::optional<Doorbells> bells_;
  std::vector<int> local_of_world_;  // host rank of each world rank, -1 on another host
  int splits_ = 0;                   // communicators split so far: the next one's group slot
};

}  // namespace

void mpi_check(int rc, const char* expr, const char* file, int line) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw ExecError(world_rank_or_minus1(),
                  std::string("MPI call `") + expr + "` failed at " + file + ":" + std::to_string(line) + ": " + msg);
}

std::unique_ptr<Transport> make_mpi_transport(int* argc, char*** argv, CoreTurnsMode turns, DoorbellMode bells) {
  return std::make_unique<MpiTransport>(argc, argv, turns, bells);
}

}  // namespace paralab::exec
