// paralab — replaying a rank's compute ops and timing communication, for calibration.
#include "analysis/calibration/measure.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "exec/backends.hpp"
#include "exec/plan.hpp"
#include "ir/enum_names.hpp"
#include "ir/error.hpp"

namespace paralab::calib {

std::string OpKey::str() const {
  char buf[160];
  if (kind == OpKind::gemm)
    std::snprintf(buf, sizeof buf, "gemm %lldx%lldx%lld b%lld %s", (long long)m, (long long)n, (long long)k,
                  (long long)batch, std::string(enum_to_string(math)).c_str());
  else
    std::snprintf(buf, sizeof buf, "%s %lld B", std::string(enum_to_string(kind)).c_str(), (long long)bytes);
  return buf;
}

OpKey op_key(const Op& op) {
  OpKey k;
  k.kind = op.kind;
  if (const GemmAttrs* g = op.gemm()) {
    k.m = g->m;
    k.n = g->n;
    k.k = g->k;
    k.batch = g->batch;
    k.math = g->math;
  } else {
    k.bytes = static_cast<int64_t>(std::llround(op.bytes));
    // Fused attention runs on the tensor cores of its math: its efficiency is fitted per math
    // (calibration_fit.cpp), so keys of the same bytes in two maths stay apart.
    if (const AttentionAttrs* a = op.attention()) k.math = a->math;
  }
  return k;
}

double OpSamples::median_us() const { return quantile(us, 0.5); }
double OpSamples::quantile_us(double q) const { return quantile(us, q); }
double CommPoint::median_us() const { return quantile(us, 0.5); }

template <class B>
void attach_if_any(B& backend, Stream stream) {
  if constexpr (requires { backend.attach_stream(stream); }) backend.attach_stream(stream);
}
void attach_stream(exec::Backend& backend, Stream stream) { attach_if_any(backend, stream); }

// ---- Replayer ------------------------------------------------------------------------------------

struct Replayer::Impl {
  const StepIR& ir;
  const StepGraph& g;
  int64_t rank;
  exec::RankPlan plan;
  std::unique_ptr<exec::Transport> world;
  std::unique_ptr<exec::Backend> backend;
  std::vector<void*> ptr;
  // Buffers a compute op would read before any compute op wrote them (written only by a skipped
  // transfer or collective): given seeded values when allocated, never leftover bytes of other
  // buffers (integers read as floats are denormals, which slow every kernel down many times).
  std::vector<char> needs_values;
  exec::NoWatchdog wait;
  std::string backend_name;
  bool cpu_time = false;  // use_thread_cpu_time()

  Impl(const StepIR& ir_, int64_t rank_, const std::string& name)
      : ir(ir_), g(ir_.graph_for(rank_)), rank(rank_), plan(exec::plan_rank(ir_, rank_, false)), backend_name(name) {
    world = exec::make_self_transport();
    backend = exec::make_backend(name, ir, rank);
    backend->setup(plan, *world);
    ptr.assign(g.buffers.size(), nullptr);
    needs_values.assign(g.buffers.size(), 0);
    std::vector<char> written(g.buffers.size(), 0);
    for (const Op& op : g.ops) {
      for (const TensorRef& t : op.reads)
        if (!written[t.buffer]) needs_values[t.buffer] = 1;
      for (const TensorRef& t : op.writes) {
        if (is_comm(op.kind)) needs_values[t.buffer] = 1;
        written[t.buffer] = 1;
      }
    }
    // Resident state as the runtime has it before a step (values: seeded random; buffers the
    // runtime copies into, such as fp32 master weights, get random values too).
    for (BufferId b = 0; b < g.buffers.size(); ++b) {
      if (!g.buffers[b].resident) continue;
      // Offload's host state is pinned host memory, as the runtime allocates it.
      ptr[b] = g.buffers[b].host ? backend->allocate_host(g.buffers[b].bytes()) : backend->allocate(g.buffers[b].bytes());
      exec::BufferPlan how = plan.buffers[b];
      if (how.fill == exec::Fill::none) how = float_like(g.buffers[b]) ? exec::BufferPlan{exec::Fill::weights, b} : exec::BufferPlan{exec::Fill::zero};
      backend->fill(ptr[b], g.buffers[b], how);
    }
    backend->synchronize();
  }
  ~Impl() {
    for (BufferId b = 0; b < ptr.size(); ++b)
      if (ptr[b]) {
        if (g.buffers[b].host) backend->deallocate_host(ptr[b], g.buffers[b].bytes());
        else backend->deallocate(ptr[b], g.buffers[b].bytes());
      }
  }
  static bool float_like(const Buffer& b) { return b.dtype == DType::f32 || b.dtype == DType::bf16 || b.dtype == DType::f16; }

  void allocate(BufferId b) {
    if (ptr[b]) return;  // a buffer allocated twice cannot happen in a valid IR; tolerate it here
    ptr[b] = backend->allocate(g.buffers[b].bytes());
    exec::BufferPlan how = plan.buffers[b];  // what the runtime does, unless a skipped op fills it
    if (how.fill == exec::Fill::none && needs_values[b] && float_like(g.buffers[b])) how = exec::BufferPlan{exec::Fill::weights, b};
    else if (how.fill == exec::Fill::none && needs_values[b]) how = exec::BufferPlan{exec::Fill::zero};
    backend->fill(ptr[b], g.buffers[b], how);
  }
  void release(BufferId b) {
    if (!ptr[b] || g.buffers[b].resident) return;
    backend->deallocate(ptr[b], g.buffers[b].bytes());
    ptr[b] = nullptr;
  }
  void* at(const exec::ResolvedRef& r, const Op& op) {
    void* base = ptr[r.buffer];
    if (!base) {  // written only by a skipped transfer's peer side: give it memory
      allocate(r.buffer);
      base = ptr[r.buffer];
      if (!base) throw InternalError("calibration replay: op " + exec::op_label(op) + " has no buffer");
    }
    return static_cast<char*>(base) + r.offset * bytes_of(g.buffers[r.buffer].dtype);
  }
};

Replayer::Replayer(const StepIR& ir, int64_t rank, const std::string& backend)
    : impl_(std::make_unique<Impl>(ir, rank, backend)) {}
Replayer::~Replayer() = default;
const StepGraph& Replayer::graph() const { return impl_->g; }
std::optional<exec::DeviceIdentity> Replayer::device_identity() const { return impl_->backend->device_identity(); }

namespace {
// The calling thread's CPU time in microseconds (POSIX clock_gettime, CLOCK_THREAD_CPUTIME_ID).
double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}
}  // namespace

void Replayer::use_thread_cpu_time() {
  if (impl_->backend_name != "cpu")
    throw std::invalid_argument("calibrate: ops can be timed by thread CPU time on the cpu backend only, not '" +
                                impl_->backend_name + "'");
  impl_->cpu_time = true;
}

void Replayer::pass(const std::function<bool(const Op&)>& want, std::vector<std::pair<OpId, double>>& out) {
  Impl& I = *impl_;
  exec::Backend& be = *I.backend;
  // Megatron zeroes gradients before each step (the runtime does too, untimed).
  for (BufferId b = 0; b < I.g.buffers.size(); ++b)
    if (I.g.buffers[b].resident && I.g.buffers[b].category == MemCategory::grads)
      be.fill(I.ptr[b], I.g.buffers[b], exec::BufferPlan{exec::Fill::zero});
  be.synchronize();
  be.begin_timing();
  Stream attached = Stream::kCount;
  std::vector<void*> rp, wp;
  int64_t ran = 0;
  for (const Op& op : I.g.ops) {
    for (BufferId b : op.allocs) I.allocate(b);
    if (!is_comm(op.kind) && want(op)) {
      if (op.stream != attached) {
        attach_stream(be, op.stream);
        attached = op.stream;
      }
      const exec::OpPlan& o = I.plan.ops[op.id];
      rp.clear();
      wp.clear();
      for (const auto& r : o.reads) rp.push_back(I.at(r, op));
      for (const auto& r : o.writes) wp.push_back(I.at(r, op));
      const exec::OpCall call{op, o, rp, wp, I.wait, 1};
      const double cpu0 = I.cpu_time ? thread_cpu_us() : 0.0;
      be.op_begin(op.stream, op.id);
      be.run(op.stream, call);
      be.op_end(op.stream, op.id);
      if (I.cpu_time) out.emplace_back(op.id, thread_cpu_us() - cpu0);
      ++ran;
    }
    for (BufferId b : op.frees) I.release(b);
  }
  be.synchronize();
  if (ran == 0 || I.cpu_time) return;
  std::vector<OpTiming> t;
  be.timings(I.rank, t);
  for (const OpTiming& x : t) out.emplace_back(x.op, std::max(0.0, x.end_us - x.start_us));
}

// ---- Communication -----------------------------------------------------------------------------

std::vector<CommPoint> measure_comm(exec::GroupComm& comm, exec::Backend& backend, const std::vector<CommCase>& cases,
                                    int reps, const std::function<void()>& tick) {
  const int n = comm.size(), me = comm.index();
  int64_t max_bytes = 0;
  for (const CommCase& c : cases) max_bytes = std::max(max_bytes, c.bytes);
  // Room for the largest call of any pattern (all-gather output, all-to-all in and out).
  const int64_t cap = (max_bytes + 4 * n * 64) * 2;
  void* a = backend.allocate(cap);
  void* b = backend.allocate(cap);
  const Buffer desc{"calibration", cap / 4, DType::f32, MemCategory::buffers};
  backend.fill(a, desc, exec::BufferPlan{exec::Fill::weights, 7});
  backend.fill(b, desc, exec::BufferPlan{exec::Fill::weights, 8});
  backend.synchronize();
  exec::NoWatchdog w;
  auto barrier = [&] {
    int64_t x = 0;
    comm.control_all_reduce(&x, 1, ReduceOp::sum);
  };
  using clock = std::chrono::steady_clock;
  std::vector<CommPoint> out;
  for (const CommCase& c : cases) {
    const DType t = c.dtype;
    const int64_t es = bytes_of(t);
    // Elements per member's share, so that `bytes` (the IR's convention) divides evenly.
    const int64_t share = std::max<int64_t>(1, c.bytes / (es * n));
    const int64_t bytes = share * es * n;
    CommPoint pt{c.pattern, t, n, bytes, {}, 0};
    for (int r = -1; r < reps; ++r) {  // r = -1: warm-up (connection setup, first touch)
      barrier();
      const auto t0 = clock::now();
      switch (c.pattern) {
        case CommPattern::all_reduce: comm.all_reduce(a, b, share * n, t, ReduceOp::sum, w); break;
        case CommPattern::all_gather:
          comm.all_gather(static_cast<char*>(a) + static_cast<ptrdiff_t>(me * share * es), a, share, t, w);
          break;
        case CommPattern::reduce_scatter: comm.reduce_scatter(a, b, share, t, ReduceOp::sum, w); break;
        case CommPattern::broadcast: comm.broadcast(a, share * n, t, 0, w); break;
        case CommPattern::all_to_all: comm.all_to_all(a, b, share, t, w); break;
        case CommPattern::send_recv:  // a ring shift: every member sends to the next, receives from the previous
          comm.send_recv(a, bytes, (me + 1) % n, b, bytes, (me + n - 1) % n, 77, w);
          break;
      }
      backend.synchronize();
      const double us = std::chrono::duration<double, std::micro>(clock::now() - t0).count();
      if (r >= 0) pt.us.push_back(us);
    }
    out.push_back(std::move(pt));
    if (tick) tick();
  }
  backend.deallocate(a, cap);
  backend.deallocate(b, cap);
  return out;
}

}  // namespace paralab::calib
