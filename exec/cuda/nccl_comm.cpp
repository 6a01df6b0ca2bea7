// paralab exec/cuda — NCCL bootstrap, enqueue of collectives and transfers, blocking wrapper,
// abort registry (see nccl_comm.hpp).
#include "exec/cuda/nccl_comm.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "exec/cuda/check.hpp"
#include "exec/error.hpp"
#include "ir/error.hpp"

namespace paralab::exec::cuda {

namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::bf16: return ncclBfloat16;
    case DType::f16: return ncclFloat16;
    case DType::i32: return ncclInt32;
    case DType::fp8:
    case DType::u8: return ncclUint8;
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::max ? ncclMax : ncclSum; }

void device_copy(void* dst, const void* src, int64_t bytes, cudaStream_t stream) {
  if (dst != src && bytes > 0)
    PARALAB_CU(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream));
}

std::mutex& registry_mu() {
  static std::mutex m;
  return m;
}
std::vector<ncclComm_t>& registry() {
  static std::vector<ncclComm_t> v;
  return v;
}

}  // namespace

void register_comm(ncclComm_t c) {
  std::lock_guard lk(registry_mu());
  registry().push_back(c);
}

void unregister_comm(ncclComm_t c) {
  std::lock_guard lk(registry_mu());
  auto& v = registry();
  v.erase(std::remove(v.begin(), v.end(), c), v.end());
}

void abort_all_comms() {
  std::vector<ncclComm_t> all;
  {
    std::lock_guard lk(registry_mu());
    all.swap(registry());
  }
  for (ncclComm_t c : all) (void)ncclCommAbort(c);  // best effort: we are failing already
}

std::unique_ptr<Comm> create_comm(Transport& world, const std::vector<int64_t>& members, int64_t rank,
                                  const std::string& label) {
  const auto it = std::find(members.begin(), members.end(), rank);
  const bool in = it != members.end();
  const int color = in ? static_cast<int>(members.front()) : -1;
  const int key = in ? static_cast<int>(it - members.begin()) : 0;
  std::unique_ptr<GroupComm> control = world.split(color, key, in ? members : std::vector<int64_t>{}, label);
  if (!in) return nullptr;
  auto c = std::make_unique<Comm>();
  c->size = static_cast<int>(members.size());
  c->index = key;
  c->members = members;
  c->label = label;
  c->control = std::move(control);
  if (c->size > 1) {
    // The id travels as 16 int64 values: the first member's, zeros elsewhere, summed.
    static_assert(sizeof(ncclUniqueId) == 16 * sizeof(int64_t));
    ncclUniqueId id{};
    if (c->index == 0) PARALAB_NCCL(ncclGetUniqueId(&id));
    int64_t words[16] = {};
    std::memcpy(words, &id, sizeof id);
    c->control->control_all_reduce(words, 16, ReduceOp::sum);
    std::memcpy(&id, words, sizeof id);
    PARALAB_NCCL(ncclCommInitRank(&c->nccl, c->size, id, c->index));
    register_comm(c->nccl);
  }
  return c;
}

void enqueue_all_reduce(const Comm& c, const void* send, void* recv, int64_t count, DType t, ReduceOp op,
                        cudaStream_t stream) {
  if (!c.nccl) return device_copy(recv, send, count * bytes_of(t), stream);
  PARALAB_NCCL(ncclAllReduce(send, recv, static_cast<size_t>(count), nccl_type(t), nccl_op(op), c.nccl, stream));
}

void enqueue_all_gather(const Comm& c, const void* send, void* recv, int64_t count, DType t, cudaStream_t stream) {
  if (!c.nccl) return device_copy(recv, send, count * bytes_of(t), stream);
  PARALAB_NCCL(ncclAllGather(send, recv, static_cast<size_t>(count), nccl_type(t), c.nccl, stream));
}

void enqueue_reduce_scatter(const Comm& c, const void* send, void* recv, int64_t count, DType t, ReduceOp op,
                            cudaStream_t stream) {
  if (!c.nccl) return device_copy(recv, send, count * bytes_of(t), stream);
  PARALAB_NCCL(ncclReduceScatter(send, recv, static_cast<size_t>(count), nccl_type(t), nccl_op(op), c.nccl, stream));
}

void enqueue_all_to_all(const Comm& c, const void* send, void* recv, int64_t count, DType t, cudaStream_t stream) {
  if (!c.nccl) return device_copy(recv, send, count * bytes_of(t), stream);
  // Grouped sends and receives (NCCL's documented all-to-all; ncclAlltoAll needs NCCL 2.28).
  const int64_t bytes = count * bytes_of(t);
  PARALAB_NCCL(ncclGroupStart());
  try {
    for (int j = 0; j < c.size; ++j) {
      PARALAB_NCCL(ncclSend(static_cast<const char*>(send) + j * bytes, static_cast<size_t>(bytes), ncclUint8, j, c.nccl, stream));
      PARALAB_NCCL(ncclRecv(static_cast<char*>(recv) + j * bytes, static_cast<size_t>(bytes), ncclUint8, j, c.nccl, stream));
    }
  } catch (...) {
    (void)ncclGroupEnd();
    throw;
  }
  PARALAB_NCCL(ncclGroupEnd());
}

void enqueue_broadcast(const Comm& c, void* buf, int64_t count, DType t, int root, cudaStream_t stream) {
  if (!c.nccl) return;
  PARALAB_NCCL(ncclBroadcast(buf, buf, static_cast<size_t>(count), nccl_type(t), root, c.nccl, stream));
}

void enqueue_send_recv(const Comm& c, const void* send, int64_t send_bytes, int to, void* recv, int64_t recv_bytes,
                       int from, cudaStream_t stream) {
  if (!c.nccl) {
    if ((to >= 0) != (from >= 0) || send_bytes != recv_bytes)
      throw InternalError("communicator " + c.label + " has one member: a one-sided transfer has no peer");
    return device_copy(recv, send, send_bytes, stream);
  }
  const bool both = to >= 0 && from >= 0;
  if (both) PARALAB_NCCL(ncclGroupStart());
  try {
    if (to >= 0) PARALAB_NCCL(ncclSend(send, static_cast<size_t>(send_bytes), ncclUint8, to, c.nccl, stream));
    if (from >= 0) PARALAB_NCCL(ncclRecv(recv, static_cast<size_t>(recv_bytes), ncclUint8, from, c.nccl, stream));
  } catch (...) {
    if (both) (void)ncclGroupEnd();
    throw;
  }
  if (both) PARALAB_NCCL(ncclGroupEnd());
}

void check_async(const Comm& c) {
  if (!c.nccl) return;
  ncclResult_t async = ncclSuccess;
  PARALAB_NCCL(ncclCommGetAsyncError(c.nccl, &async));
  if (async != ncclSuccess && async != ncclInProgress)
    throw_nccl(async, ("asynchronous error on communicator " + c.label).c_str(), __FILE__, __LINE__);
}

namespace {

class BlockingComm final : public GroupComm {
 public:
  BlockingComm(const Comm& c, int device) : c_(c), device_(device) {
    PARALAB_CU(cudaSetDevice(device_));
    PARALAB_CU(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~BlockingComm() override {
    if (stream_) (void)cudaStreamDestroy(stream_);
  }
  [[nodiscard]] int size() const override { return c_.size; }
  [[nodiscard]] int index() const override { return c_.index; }
  [[nodiscard]] const std::vector<int64_t>& members() const override { return c_.members; }
  [[nodiscard]] const std::string& label() const override { return c_.label; }

  void all_reduce(const void* send, void* recv, int64_t count, DType t, ReduceOp op, const WaitPolicy& w) override {
    prepare();
    enqueue_all_reduce(c_, send, recv, count, t, op, stream_);
    wait(w);
  }
  void all_gather(const void* send, void* recv, int64_t count, DType t, const WaitPolicy& w) override {
    prepare();
    enqueue_all_gather(c_, send, recv, count, t, stream_);
    wait(w);
  }
  void reduce_scatter(const void* send, void* recv, int64_t count, DType t, ReduceOp op, const WaitPolicy& w) override {
    prepare();
    enqueue_reduce_scatter(c_, send, recv, count, t, op, stream_);
    wait(w);
  }
  void all_to_all(const void* send, void* recv, int64_t count, DType t, const WaitPolicy& w) override {
    prepare();
    enqueue_all_to_all(c_, send, recv, count, t, stream_);
    wait(w);
  }
  void broadcast(void* buf, int64_t count, DType t, int root, const WaitPolicy& w) override {
    prepare();
    enqueue_broadcast(c_, buf, count, t, root, stream_);
    wait(w);
  }
  void send_recv(const void* send, int64_t send_bytes, int to, void* recv, int64_t recv_bytes, int from, uint32_t,
                 const WaitPolicy& w) override {
    prepare();
    enqueue_send_recv(c_, send, send_bytes, to, recv, recv_bytes, from, stream_);
    wait(w);
  }
  void control_all_reduce(int64_t* values, int n, ReduceOp op) override { c_.control->control_all_reduce(values, n, op); }

 private:
  void prepare() const {
    PARALAB_CU(cudaSetDevice(device_));
    // Buffers were written by other streams of the backend (uploads): wait for the device.
    PARALAB_CU(cudaDeviceSynchronize());
  }
  // Polls the stream (never a blocking synchronize: a peer that never joins must not hang us).
  void wait(const WaitPolicy& w) const {
    const auto t0 = std::chrono::steady_clock::now();
    int64_t sleep_us = 0;
    for (;;) {
      const cudaError_t q = cudaStreamQuery(stream_);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) throw_cuda(q, "cudaStreamQuery(communicator stream)", __FILE__, __LINE__);
      check_async(c_);
      w.check(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      sleep_us = std::min<int64_t>(sleep_us + 10, 1000);
      std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    }
  }
  const Comm& c_;
  int device_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<GroupComm> make_blocking_comm(const Comm& c, int device) {
  return std::make_unique<BlockingComm>(c, device);
}

}  // namespace paralab::exec::cuda
