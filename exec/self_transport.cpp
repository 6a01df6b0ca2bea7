// paralab exec — the one-rank world (no MPI): every group has one member, so collectives are
// local copies and the control operations are identities.
#include <cstring>
#include <stdexcept>

#include "exec/comm.hpp"
#include "exec/core_turns.hpp"
#include "exec/error.hpp"

namespace paralab::exec {

namespace {

class SelfComm final : public GroupComm {
 public:
  SelfComm(int64_t world_rank, std::string label) : members_{world_rank}, label_(std::move(label)) {}
  [[nodiscard]] int size() const override { return 1; }
  [[nodiscard]] int index() const override { return 0; }
  [[nodiscard]] const std::vector<int64_t>& members() const override { return members_; }
  [[nodiscard]] const std::string& label() const override { return label_; }

  void all_reduce(const void* send, void* recv, int64_t count, DType t, ReduceOp, const WaitPolicy&) override {
    copy(send, recv, count * bytes_of(t));
  }
  void all_gather(const void* send, void* recv, int64_t count, DType t, const WaitPolicy&) override {
    copy(send, recv, count * bytes_of(t));
  }
  void reduce_scatter(const void* send, void* recv, int64_t count, DType t, ReduceOp, const WaitPolicy&) override {
    copy(send, recv, count * bytes_of(t));
  }
  void all_to_all(const void* send, void* recv, int64_t count, DType t, const WaitPolicy&) override {
    copy(send, recv, count * bytes_of(t));
  }
  void broadcast(void*, int64_t, DType, int, const WaitPolicy&) override {}
  void send_recv(const void* send, int64_t send_bytes, int to, void* recv, int64_t recv_bytes, int from,
                 uint32_t tag, const WaitPolicy&) override {
    // A ring of one: what is sent is what is received (both sides in one call).
    if ((to >= 0) != (from >= 0) || send_bytes != recv_bytes)
      throw ExecError(members_[0], "group " + label_ + " has one member: a one-sided transfer (tag " +
                                       std::to_string(tag) + ") has no peer");
    if (to >= 0) copy(send, recv, send_bytes);
  }
  void control_all_reduce(int64_t*, int, ReduceOp) override {}

 private:
  static void copy(const void* src, void* dst, int64_t bytes) {
    if (src != dst && bytes > 0) std::memmove(dst, src, static_cast<size_t>(bytes));
  }
  std::vector<int64_t> members_;
  std::string label_;
};

class SelfTransport final : public Transport {
 public:
  [[nodiscard]] int rank() const override { return 0; }
  [[nodiscard]] int size() const override { return 1; }
  [[nodiscard]] std::string name() const override { return "self"; }
  [[nodiscard]] int local_size() const override { return 1; }
  [[nodiscard]] int node_cores() const override { return usable_cores(); }
  void barrier() override {}
  std::unique_ptr<GroupComm> split(int color, int, std::vector<int64_t>, std::string label) override {
    if (color < 0) return nullptr;
    return std::make_unique<SelfComm>(0, std::move(label));
  }
  void all_reduce(int64_t*, int, ReduceOp) override {}
  ClockOffset clock_offset(const std::function<double()>&) override { return {}; }
  std::vector<std::string> gather_to_root(const std::string& blob) override { return {blob}; }
  void abort(int) override {}
  void finalize() override {}
};

}  // namespace

std::unique_ptr<Transport> make_self_transport() { return std::make_unique<SelfTransport>(); }

std::unique_ptr<GroupComm> make_self_comm(int64_t world_rank, std::string label) {
  return std::make_unique<SelfComm>(world_rank, std::move(label));
}

}  // namespace paralab::exec
