// paralab exec/cuda — the in-process world of `--gpus N` (see thread_world.hpp).
#include "exec/cuda/thread_world.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "exec/cuda/cuda_backend.hpp"
#include "exec/cuda/nccl_comm.hpp"
#include "exec/core_turns.hpp"
#include "exec/error.hpp"
#include "ir/error.hpp"

namespace paralab::exec::cuda {

namespace {

// n participants deposit a blob each; every one gets all n blobs (index = participant).
class Rendezvous {
 public:
  explicit Rendezvous(int n) : n_(n), slots_(static_cast<size_t>(n)) {}
  std::vector<std::string> exchange(int index, std::string mine) {
    std::unique_lock lk(mu_);
    const uint64_t gen = gen_;
    slots_[static_cast<size_t>(index)] = std::move(mine);
    if (++arrived_ == n_) {
      result_ = slots_;
      arrived_ = 0;
      ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait(lk, [&] { return gen_ != gen; });
    }
    return result_;  // copied under the lock: the next round cannot overwrite it before we leave
  }

 private:
  int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t gen_ = 0;
  std::vector<std::string> slots_, result_;
};

std::string pack(const int64_t* v, int n) { return std::string(reinterpret_cast<const char*>(v), static_cast<size_t>(n) * 8); }

void reduce_into(int64_t* values, int n, ReduceOp op, const std::vector<std::string>& all) {
  for (int i = 0; i < n; ++i) {
    int64_t acc = 0;
    bool first = true;
    for (const std::string& s : all) {
      int64_t x;
      std::memcpy(&x, s.data() + 8 * i, 8);
      acc = first ? x : op == ReduceOp::max ? std::max(acc, x) : acc + x;
      first = false;
    }
    values[i] = acc;
  }
}

class ThreadGroupComm final : public GroupComm {
 public:
  ThreadGroupComm(std::shared_ptr<Rendezvous> rv, int index, std::vector<int64_t> members, std::string label)
      : rv_(std::move(rv)), index_(index), members_(std::move(members)), label_(std::move(label)) {}
  [[nodiscard]] int size() const override { return static_cast<int>(members_.size()); }
  [[nodiscard]] int index() const override { return index_; }
  [[nodiscard]] const std::vector<int64_t>& members() const override { return members_; }
  [[nodiscard]] const std::string& label() const override { return label_; }
  void all_reduce(const void*, void*, int64_t, DType, ReduceOp, const WaitPolicy&) override { host_only(); }
  void all_gather(const void*, void*, int64_t, DType, const WaitPolicy&) override { host_only(); }
  void reduce_scatter(const void*, void*, int64_t, DType, ReduceOp, const WaitPolicy&) override { host_only(); }
  void all_to_all(const void*, void*, int64_t, DType, const WaitPolicy&) override { host_only(); }
  void broadcast(void*, int64_t, DType, int, const WaitPolicy&) override { host_only(); }
  void send_recv(const void*, int64_t, int, void*, int64_t, int, uint32_t, const WaitPolicy&) override { host_only(); }
  void control_all_reduce(int64_t* values, int n, ReduceOp op) override {
    reduce_into(values, n, op, rv_->exchange(index_, pack(values, n)));
  }

 private:
  [[noreturn]] void host_only() const {
    throw InternalError("communicator " + label_ + " of the in-process world carries control values only; data "
                        "moves over NCCL");
  }
  std::shared_ptr<Rendezvous> rv_;
  int index_;
  std::vector<int64_t> members_;
  std::string label_;
};

struct Shared {
  explicit Shared(int ranks) : n(ranks), world(ranks) {}
  int n;
  Rendezvous world;
  std::mutex mu;
  std::map<std::pair<int64_t, int>, std::shared_ptr<Rendezvous>> groups;  // (split number, color)
};

class ThreadTransport final : public Transport {
 public:
  ThreadTransport(std::shared_ptr<Shared> s, int rank) : s_(std::move(s)), rank_(rank) {}
  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return s_->n; }
  [[nodiscard]] std::string name() const override { return "threads"; }
  [[nodiscard]] int local_size() const override { return s_->n; }
  [[nodiscard]] int node_cores() const override { return usable_cores(); }  // one process
  void barrier() override { s_->world.exchange(rank_, {}); }
  std::unique_ptr<GroupComm> split(int color, int key, std::vector<int64_t> members, std::string label) override {
    const int64_t seq = splits_++;
    if (color < 0) return nullptr;
    std::shared_ptr<Rendezvous> rv;
    {
      std::lock_guard lk(s_->mu);
      auto& slot = s_->groups[{seq, color}];
      if (!slot) slot = std::make_shared<Rendezvous>(static_cast<int>(members.size()));
      rv = slot;
    }
    return std::make_unique<ThreadGroupComm>(std::move(rv), key, std::move(members), std::move(label));
  }
  void all_reduce(int64_t* values, int n, ReduceOp op) override {
    reduce_into(values, n, op, s_->world.exchange(rank_, pack(values, n)));
  }
  // The ranks are threads of one process and share its steady clock: a rank's step clock minus
  // that shared clock is a constant, read back to back (error: half the gap between the reads).
  ClockOffset clock_offset(const std::function<double()>& now_us) override {
    const auto shared_us = [] {
      return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
    };
    const double a = shared_us(), mine = now_us(), b = shared_us();
    const double d[2] = {mine - 0.5 * (a + b), 0.5 * (b - a)};
    const std::vector<std::string> all =
        s_->world.exchange(rank_, std::string(reinterpret_cast<const char*>(d), sizeof d));
    double d0[2];
    std::memcpy(d0, all[0].data(), sizeof d0);
    return ClockOffset{d[0] - d0[0], d[1] + d0[1]};
  }
  std::vector<std::string> gather_to_root(const std::string& blob) override {
    std::vector<std::string> all = s_->world.exchange(rank_, blob);
    if (rank_ != 0) return {};
    return all;
  }
  void abort(int code) override {
    abort_all_comms();
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(code);  // the other ranks are threads of this process
  }
  void finalize() override {}

 private:
  std::shared_ptr<Shared> s_;
  int rank_;
  int64_t splits_ = 0;
};

}  // namespace

std::vector<std::unique_ptr<Transport>> make_thread_worlds(int n) {
  if (n < 1) throw InternalError("make_thread_worlds: n must be >= 1");
  auto shared = std::make_shared<Shared>(n);
  std::vector<std::unique_ptr<Transport>> out;
  for (int r = 0; r < n; ++r) out.push_back(std::make_unique<ThreadTransport>(shared, r));
  return out;
}

int run_rank_threads(int n, const std::function<int(Transport& world)>& body) {
  std::string why;
  int count = 0;
  if (!cuda_available(&why, &count)) throw ExecError(0, why);
  if (count < n)
    throw ExecError(0, "--gpus " + std::to_string(n) + " needs " + std::to_string(n) + " CUDA devices but this machine has " +
                           std::to_string(count) + " (CUDA_VISIBLE_DEVICES limits what is visible)");
  auto worlds = make_thread_worlds(n);
  std::vector<int> rc(static_cast<size_t>(n), 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      set_thread_device(r);
      try {
        rc[static_cast<size_t>(r)] = body(*worlds[static_cast<size_t>(r)]);
      } catch (const std::exception& e) {  // the body reports its own errors; this is a last resort
        std::fprintf(stderr, "paralab execute: rank %d: error: %s\n", r, e.what());
        worlds[static_cast<size_t>(r)]->abort(1);
      }
    });
  for (auto& t : threads) t.join();
  return *std::max_element(rc.begin(), rc.end());
}

}  // namespace paralab::exec::cuda
