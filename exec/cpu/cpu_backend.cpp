// paralab exec/cpu — CPU backend.
#include "exec/cpu/cpu_backend.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <new>

#include "exec/cpu/block_cache.hpp"
#include "exec/cpu/cpu_math.hpp"
#include "exec/error.hpp"
#include "exec/fill.hpp"
#include "ir/error.hpp"

namespace paralab::exec {

namespace {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const StepIR& ir) : ir_(ir) {}

  [[nodiscard]] std::string_view name() const override { return "cpu"; }
  [[nodiscard]] bool synchronous() const override { return true; }

  void setup(const RankPlan& plan, Transport& world) override {
    plan_ = &plan;
    scaler_.scale = static_cast<float>(ir_.scenario.training.initial_loss_scale);
    comms_.clear();
    for (const CommKey& k : plan.comms) {
      std::vector<int64_t> members = ir_.layout.members(k.group, plan.rank);
      const auto it = std::find(members.begin(), members.end(), plan.rank);
      const bool in = it != members.end();
      const int color = in ? static_cast<int>(members.front()) : -1;
      const int key = in ? static_cast<int>(it - members.begin()) : 0;
      comms_.push_back(world.split(color, key, in ? members : std::vector<int64_t>{}, k.label()));
    }
    start_.assign(plan.graph->ops.size(), 0.0);
    end_.assign(plan.graph->ops.size(), 0.0);
    ran_.assign(plan.graph->ops.size(), 0);
  }

  std::vector<GroupComm*> comms() override {
    std::vector<GroupComm*> out;
    for (auto& c : comms_) out.push_back(c.get());
    return out;
  }

  // Buffers come from a caching allocator (block_cache.hpp): from the second step on, the
  // step's allocations are served without page faults, as a GPU framework's are.
  void* allocate(int64_t bytes) override { return blocks_.allocate(bytes); }
  void deallocate(void* p, int64_t) override { blocks_.deallocate(p); }

  void fill(void* p, const Buffer& b, const BufferPlan& how) override {
    const int64_t n = b.elements;
    switch (how.fill) {
      case Fill::none: return;
      case Fill::zero: std::memset(p, 0, static_cast<size_t>(b.bytes())); return;
      case Fill::token_ids: {
        if (b.dtype != DType::i32) throw InternalError("token ids in a non-int32 buffer '" + b.name + "'");
        auto* ids = static_cast<int32_t*>(p);
        for (int64_t i = 0; i < n; ++i) ids[i] = token_id(how.key, how.global_index(i), how.vocab);
        return;
      }
      default: break;
    }
    if (b.dtype != DType::f32 && b.dtype != DType::bf16 && b.dtype != DType::f16) {
      if (how.fill != Fill::poison) throw InternalError("random fill of a non-float buffer '" + b.name + "'");
      return;
    }
    constexpr int64_t kChunk = 4096;
    float tmp[kChunk];
    for (int64_t i = 0; i < n; i += kChunk) {
      const int64_t m = std::min(kChunk, n - i);
      for (int64_t j = 0; j < m; ++j) tmp[j] = fill_value(how.fill, how.key, how.global_offset + i + j);
      cpu::store_f32(static_cast<char*>(p) + i * bytes_of(b.dtype), b.dtype, m, tmp);
    }
  }

  void to_host(void* host, const void* p, int64_t bytes) override { std::memcpy(host, p, static_cast<size_t>(bytes)); }
  void from_host(void* p, const void* host, int64_t bytes) override { std::memcpy(p, host, static_cast<size_t>(bytes)); }

  void run(Stream stream, const OpCall& call) override {
    cpu::CpuContext ctx{*plan_, ir_.shape, ir_.scenario, scratch_[static_cast<size_t>(stream)], scaler_};
    const Op& op = call.op;
    switch (op.kind) {
      case OpKind::gemm: cpu::run_gemm(call, ctx); break;
      case OpKind::attention_fwd:
      case OpKind::attention_bwd: cpu::run_attention(call, ctx); break;
      case OpKind::collective:
      case OpKind::send:
      case OpKind::recv:
      case OpKind::sendrecv: {
        GroupComm* c = call.plan.comm >= 0 ? comms_.at(static_cast<size_t>(call.plan.comm)).get() : nullptr;
        if (!c) throw InternalError("op " + op_label(op) + ": no communicator on this rank");
        cpu::run_comm(call, ctx, *c);
        break;
      }
      default: cpu::run_kernel(call, ctx); break;
    }
  }

  void begin_timing() override {
    origin_ = std::chrono::steady_clock::now();
    std::fill(ran_.begin(), ran_.end(), 0);
  }
  void op_begin(Stream, OpId op) override { start_[op] = now_us(); }
  void op_end(Stream, OpId op) override {
    end_[op] = now_us();
    ran_[op] = 1;
  }
  [[nodiscard]] double now_us() const override {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin_).count();
  }
  void timings(int64_t rank, std::vector<OpTiming>& out) override {
    for (OpId i = 0; i < ran_.size(); ++i)
      if (ran_[i]) out.push_back({rank, i, start_[i], end_[i]});
  }
  void synchronize() override {}
  [[nodiscard]] double loss_scale() override { return scaler_.scale; }

 private:
  const StepIR& ir_;
  const RankPlan* plan_ = nullptr;
  cpu::BlockCache blocks_;  // before the members that may hold its blocks: destroyed after them
  std::vector<std::unique_ptr<GroupComm>> comms_;
  std::array<cpu::Scratch, kStreams> scratch_;
  kernels::LossScaleState scaler_;
  std::chrono::steady_clock::time_point origin_ = std::chrono::steady_clock::now();
  std::vector<double> start_, end_;
  std::vector<uint8_t> ran_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const StepIR& ir) { return std::make_unique<CpuBackend>(ir); }

}  // namespace paralab::exec
