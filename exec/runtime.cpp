// paralab exec — stream workers, dependencies, memory events, the watchdog's wait policy.
// Failures (recorded, described, injected) are in runtime_failure.cpp.
#include "exec/runtime.hpp"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "exec/core_turns.hpp"
#include "exec/error.hpp"
#include "exec/fill.hpp"
#include "ir/enum_names.hpp"
#include "ir/error.hpp"
#include "kernels/dtype.hpp"

namespace paralab::exec {

double MemoryStats::resident_total() const {
  double t = 0;
  for (double x : resident) t += x;
  return t;
}

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}
}  // namespace

// The wait policy of one op: gives up when another stream failed, or with a watchdog report
// when the op has waited too long for its peers or a core turn. It holds the op's core turn
// (exec/core_turns.hpp) when the node hands them out: taken before the op's timing begins (its
// start is when its thread may run), given back when the op ends or throws, and, while a
// communication call polls, handed to the next waiting thread and queued for again.
class Runtime::OpWait final : public WaitPolicy {
 public:
  OpWait(const Runtime& rt, const Op& op) : rt_(rt), op_(op) {}
  ~OpWait() override { give_turn(); }
  OpWait(const OpWait&) = delete;
  OpWait& operator=(const OpWait&) = delete;
  void take_turn() const {
    if (!rt_.turns_) return;
    rt_.turns_->acquire(*this);
    held_ = true;
  }
  void give_turn() const {
    if (held_) rt_.turns_->release();
    held_ = false;
  }
  bool yield_turn() const override {
    if (!held_) return false;
    if (rt_.turns_->waiting() > 0) {
      give_turn();
      take_turn();
    }
    return true;
  }
  void check(double waited_s) const override {
    rt_.check_cancel();
    if (waited_s > rt_.opts_.watchdog_s)
      throw WatchdogError(rt_.plan_.rank, "watchdog: op " + op_label(op_) + " waited " + seconds(waited_s) + " for " +
                                              rt_.describe_comm(op_) + "; " + rt_.describe_streams());
  }

 private:
  const Runtime& rt_;
  const Op& op_;
  mutable bool held_ = false;
};

Runtime::Runtime(const RankPlan& plan, Backend& backend, Transport& world, RuntimeOptions opts)
    : plan_(plan),
      g_(*plan.graph),
      backend_(backend),
      world_(world),
      opts_(opts),
      turns_(backend.synchronous() ? world.core_turns() : nullptr),
      ptr_(plan.graph->buffers.size()),
      state_(plan.graph->ops.size()) {
  for (auto& p : ptr_) p.store(nullptr);
  backend_.set_watchdog(opts_.watchdog_s);
  const FaultInjection& f = opts_.fault;
  if (f.action != FaultInjection::Action::none && f.rank == plan_.rank) {
    if (f.op && *f.op < g_.ops.size()) fault_op_ = *f.op;
    for (const Op& op : g_.ops)
      if (!fault_op_ && f.kind && op.kind == *f.kind) fault_op_ = op.id;
    if (!fault_op_)
      throw ExecError(plan_.rank, "fault injection: no op " +
                                      (f.op ? std::to_string(*f.op) : "of kind " + std::string(enum_to_string(*f.kind))) +
                                      " on this rank");
  }
}

int Runtime::core_turns() const { return turns_ ? turns_->cores() : 0; }

Runtime::~Runtime() {
  if (leak_) {
    (void)repeat_.release();  // in-flight device work may still write into it, as into the buffers
    return;
  }
  for (BufferId b = 0; b < ptr_.size(); ++b)
    if (void* p = ptr_[b].load()) {
      if (g_.buffers[b].host) backend_.deallocate_host(p, g_.buffers[b].bytes());
      else backend_.deallocate(p, g_.buffers[b].bytes());
    }
}

void Runtime::initialize() {
  if (opts_.slowdown.extra_runs() > 0) repeat_ = std::make_unique<RepeatScratch>(opts_.slowdown, plan_, backend_);
  for (BufferId b = 0; b < g_.buffers.size(); ++b) {
    const Buffer& buf = g_.buffers[b];
    if (!buf.resident) continue;
    void* p = buf.host ? backend_.allocate_host(buf.bytes()) : backend_.allocate(buf.bytes());
    ptr_[b].store(p);
    backend_.fill(p, buf, plan_.buffers[b]);
    if (!buf.host) mem_.resident[static_cast<size_t>(buf.category)] += static_cast<double>(buf.bytes());
  }
  // Parameters: every element as the element of the unsharded model it is (exec/fill.hpp), so
  // every layout starts from the same model; norm gains near 1. A ZeRO-3 bucket holds the shard
  // [global_offset, global_offset + elements) of the bucket.
  for (const ParamRegion& r : plan_.params) {
    const Buffer& buf = g_.buffers[r.buffer];
    const int64_t lo = plan_.buffers[r.buffer].global_offset, hi = lo + buf.elements;
    const int64_t first = std::max(lo, r.offset), last = std::min(hi, r.offset + r.rows * r.cols);
    if (first >= last) continue;
    void* dst = static_cast<char*>(ptr_[r.buffer].load()) + (first - lo) * bytes_of(buf.dtype);
    if (backend_.fill_params(dst, buf.dtype, r, first - r.offset, last - first)) continue;
    const fillmath::ParamGeo geo = param_geo(r);
    std::vector<float> v(static_cast<size_t>(last - first));
    for (int64_t e = first; e < last; ++e) {
      const int64_t local = e - r.offset;
      v[static_cast<size_t>(e - first)] = fillmath::param_value(geo, local / r.cols, local % r.cols);
    }
    std::vector<uint8_t> bytes(v.size() * static_cast<size_t>(bytes_of(buf.dtype)));
    for (size_t i = 0; i < v.size(); ++i) {
      if (buf.dtype == DType::f32) {
        std::memcpy(bytes.data() + 4 * i, &v[i], 4);
        continue;
      }
      const uint16_t h = buf.dtype == DType::bf16 ? kernels::f32_to_bf16_bits(v[i]) : kernels::f32_to_f16_bits(v[i]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
    backend_.from_host(dst, bytes.data(), static_cast<int64_t>(bytes.size()));
  }
  // Mixed precision: the fp32 master copy starts equal to the (rounded) model weights.
  for (const auto& mc : plan_.master_copies) {
    const Buffer& m = g_.buffers[mc.master];
    const Buffer& w = g_.buffers[mc.weights];
    const char* wsrc = static_cast<const char*>(ptr_[mc.weights].load()) + mc.weights_offset * bytes_of(w.dtype);
    if (backend_.widen_copy(static_cast<float*>(ptr_[mc.master].load()), wsrc, w.dtype, m.elements)) continue;
    std::vector<uint8_t> wb(static_cast<size_t>(m.elements * bytes_of(w.dtype)));
    backend_.to_host(wb.data(), wsrc, static_cast<int64_t>(wb.size()));
    std::vector<float> f(static_cast<size_t>(m.elements));
    for (int64_t i = 0; i < m.elements; ++i) {
      if (w.dtype == DType::f32) {
        std::memcpy(&f[static_cast<size_t>(i)], wb.data() + 4 * i, 4);
        continue;
      }
      uint16_t h;
      std::memcpy(&h, wb.data() + 2 * i, 2);
      f[static_cast<size_t>(i)] = w.dtype == DType::bf16 ? kernels::bf16_bits_to_f32(h) : kernels::f16_bits_to_f32(h);
    }
    backend_.from_host(ptr_[mc.master].load(), f.data(), m.elements * 4);
  }
}

std::vector<uint8_t> Runtime::read_buffer(BufferId b) const {
  const void* p = ptr_.at(b).load();
  if (!p) throw InternalError("Runtime::read_buffer: buffer '" + g_.buffers[b].name + "' is not live");
  std::vector<uint8_t> out(static_cast<size_t>(g_.buffers[b].bytes()));
  backend_.to_host(out.data(), p, static_cast<int64_t>(out.size()));
  return out;
}

void Runtime::check_cancel() const {
  if (failed_.load(std::memory_order_acquire)) throw Cancelled();
}

void Runtime::wake_waiters(OpId done) {
  // The op's state was stored (seq_cst) before this reads the streams' waiting_on (seq_cst),
  // and a waiter stores waiting_on before it reads the state: one of the two sees the other,
  // so a stream this skips does not sleep (the store-load pattern; C++20 [atomics.order]).
  // A waiter checks the state under mu_ before it sleeps, so notifying under mu_ loses no wake.
  for (StreamState& st : streams_) {
    if (st.waiting_on.load() != done) continue;
    std::lock_guard lk(mu_);
    st.cv.notify_all();
  }
}

void Runtime::wait_dependency(const Op& op, OpId dep) {
  const uint8_t need = backend_.synchronous() ? 2 : 1;
  if (state_[dep].load(std::memory_order_acquire) >= need) return;
  StreamState& st = streams_[static_cast<size_t>(op.stream)];
  st.waiting_on.store(dep);  // before the state is read again: see wake_waiters
  const int64_t t0 = now_ns();
  std::unique_lock lk(mu_);
  while (state_[dep].load() < need) {
    if (failed_.load()) throw Cancelled();
    st.cv.wait_for(lk, std::chrono::milliseconds(50));
    // A stall, not a wait: nothing on this rank finished for the whole watchdog period.
    const int64_t now = now_ns();
    const double idle = static_cast<double>(now - std::max(t0, last_progress_ns_.load())) * 1e-9;
    if (idle > opts_.watchdog_s && observing_.load() == 0 && state_[dep].load() < need) {
      lk.unlock();
      const double waited = static_cast<double>(now - t0) * 1e-9;
      throw WatchdogError(plan_.rank, "watchdog: op " + op_label(op) + " waited " + seconds(waited) + " for op " +
                                          op_label(g_.op(dep)) + ", which is " + describe_op_state(dep) +
                                          ", and no op of this rank finished for " + seconds(idle) + "; " +
                                          describe_streams());
    }
  }
  st.waiting_on.store(kNoOp);
}

void Runtime::allocate(BufferId b, OpId by) {
  const Buffer& buf = g_.buffers[b];
  if (ptr_[b].load()) throw InternalError("Runtime: buffer '" + buf.name + "' allocated twice");
  void* p = backend_.allocate(buf.bytes());
  backend_.fill(p, buf, plan_.buffers[b]);
  ptr_[b].store(p, std::memory_order_release);
  std::lock_guard lk(mem_mu_);
  live_[static_cast<size_t>(buf.category)] += static_cast<double>(buf.bytes());
  double now = 0;
  for (double x : live_) now += x;
  if (now > mem_.peak_transient) {
    mem_.peak_transient = now;
    mem_.at_peak = live_;
    mem_.peak_op = by;
    mem_.peak_time_us = backend_.now_us();
  }
}

void Runtime::release(BufferId b) {
  const Buffer& buf = g_.buffers[b];
  void* p = ptr_[b].exchange(nullptr);
  if (!p) throw InternalError("Runtime: buffer '" + buf.name + "' freed while not live");
  backend_.deallocate(p, buf.bytes());
  std::lock_guard lk(mem_mu_);
  live_[static_cast<size_t>(buf.category)] -= static_cast<double>(buf.bytes());
}

void Runtime::worker(Stream s, int64_t step, StepRun& out, std::mutex& out_mu) {
  StreamState& st = streams_[static_cast<size_t>(s)];
  const Op* current = nullptr;
  try {
    backend_.attach_stream(s);
    if (turns_ && !use_batch_scheduling()) batch_refused_.store(true);
    std::vector<void*> rp, wp;
    double loss_sum = 0;
    int64_t loss_tokens = 0, ran = 0, extra_runs = 0;
    for (OpId id : g_.streams[static_cast<size_t>(s)]) {
      const Op& op = g_.op(id);
      current = &op;
      st.current.store(id);
      st.phase.store(static_cast<uint8_t>(Phase::waiting));
      for (OpId dep : op.deps) {
        wait_dependency(op, dep);
        if (!backend_.synchronous()) backend_.wait_for(s, dep);
      }
      check_cancel();
      for (BufferId b : op.allocs) allocate(b, id);
      const OpPlan& o = plan_.ops[id];
      rp.clear();
      wp.clear();
      auto ptr = [&](const ResolvedRef& r) {
        void* base = ptr_[r.buffer].load(std::memory_order_acquire);
        if (!base) throw InternalError("op " + op_label(op) + " uses buffer '" + g_.buffers[r.buffer].name + "' that is not live");
        return static_cast<void*>(static_cast<char*>(base) + r.offset * bytes_of(g_.buffers[r.buffer].dtype));
      };
      for (const ResolvedRef& r : o.reads) rp.push_back(ptr(r));
      for (const ResolvedRef& r : o.writes) wp.push_back(ptr(r));
      OpWait wait(*this, op);
      const OpCall call{op, o, rp, wp, wait, step};
      st.phase.store(static_cast<uint8_t>(Phase::running));
      const bool drop = fault_op_ && *fault_op_ == id && step == opts_.fault.step &&
                        opts_.fault.action == FaultInjection::Action::drop;
      apply_fault(op, step);
      const bool observe = opts_.observer && opts_.observer->wants(op);
      // The observer's host work counts as progress for the watchdog (observing_).
      auto observed = [&](auto&& f) {
        struct Observing {
          std::atomic<int>& n;
          explicit Observing(std::atomic<int>& c) : n(c) { n.fetch_add(1); }
          ~Observing() { n.fetch_sub(1); }
        } guard(observing_);
        f();
        last_progress_ns_.store(now_ns());
      };
      if (observe) observed([&] { opts_.observer->before(call); });
      wait.take_turn();
      backend_.op_begin(s, id);
      if (const int32_t runs = opts_.slowdown.runs_of(id); runs > 1 && !drop) {
        // A slowed rank's extra runs: real inputs, scratch outputs, timed with the op.
        const OpCall extra{op, o, rp, repeat_->writes(s, o, wp), wait, step};
        for (int32_t k = 1; k < runs; ++k) backend_.run(s, extra);
        extra_runs += runs - 1;
      }
      if (!drop) backend_.run(s, call);
      backend_.op_end(s, id);
      wait.give_turn();
      if (observe) observed([&] { opts_.observer->after(call); });
      ++ran;
      if (op.kind == OpKind::xent_loss && backend_.synchronous()) {
        std::vector<float> loss(static_cast<size_t>(o.writes[0].numel));
        backend_.to_host(loss.data(), wp[0], o.writes[0].numel * 4);
        for (float x : loss) loss_sum += x;
        loss_tokens += o.writes[0].numel;
      }
      for (BufferId b : op.frees) release(b);
      last_progress_ns_.store(now_ns());
      state_[id].store(2);  // seq_cst: see wake_waiters
      wake_waiters(id);
    }
    st.phase.store(static_cast<uint8_t>(Phase::finished));
    std::lock_guard lk(out_mu);
    out.loss_sum += loss_sum;
    out.loss_tokens += loss_tokens;
    out.ops_run += ran;
    out.extra_runs += extra_runs;
  } catch (const Cancelled&) {
    st.phase.store(static_cast<uint8_t>(Phase::finished));
  } catch (const WatchdogError& e) {
    fail(e.cause(), true);
  } catch (const ExecError& e) {
    fail(e.cause(), false);
  } catch (const std::exception& e) {
    fail(current ? "op " + op_label(*current) + " failed: " + e.what() : std::string(e.what()), false);
  }
}

StepRun Runtime::run_step(int64_t step) {
  // Megatron zeroes the gradient buffers before each step (zero_grad_buffer); untimed.
  for (BufferId b = 0; b < g_.buffers.size(); ++b)
    if (g_.buffers[b].resident && g_.buffers[b].category == MemCategory::grads)
      backend_.fill(ptr_[b].load(), g_.buffers[b], BufferPlan{Fill::zero});
  for (auto& s : state_) s.store(0);
  for (auto& st : streams_) {
    st.current.store(kNoOp);
    st.waiting_on.store(kNoOp);
    st.phase.store(0);
  }
  live_.fill(0);
  mem_.peak_transient = 0;
  mem_.at_peak.fill(0);
  mem_.peak_op = 0;
  mem_.peak_time_us = 0;

  // A common time origin: every rank leaves the barrier within microseconds of the others.
  world_.barrier();
  world_.barrier();
  backend_.begin_timing();
  last_progress_ns_.store(now_ns());

  StepRun out;
  std::mutex out_mu;
  std::vector<std::thread> threads;
  for (int s = 0; s < kStreams; ++s)
    if (plan_.stream_used[static_cast<size_t>(s)])
      threads.emplace_back([this, s, step, &out, &out_mu] { worker(static_cast<Stream>(s), step, out, out_mu); });
  for (auto& t : threads) t.join();
  if (failed_.load()) {
    // Transfers from peers or device work may still be in flight into live buffers, so they are
    // left to the process's teardown; alone and synchronous, nothing can be, and they are freed.
    leak_ = world_.size() > 1 || !backend_.synchronous();
    if (error_is_watchdog_) throw WatchdogError(plan_.rank, error_);
    throw ExecError(plan_.rank, error_);
  }
  backend_.synchronize();
  if (!backend_.synchronous()) backend_.collect_loss(out.loss_sum, out.loss_tokens);
  out.wall_s = backend_.now_us() * 1e-6;
  backend_.timings(plan_.rank, out.ops);
  out.memory = mem_;
  // Every rank's times onto rank 0's clock (collective; the streams are drained, so the
  // ping-pong runs on an otherwise idle rank).
  out.clock = world_.clock_offset([this] { return backend_.now_us(); });
  for (OpTiming& t : out.ops) {
    t.start_us -= out.clock.offset_us;
    t.end_us -= out.clock.offset_us;
  }
  out.memory.peak_time_us -= out.clock.offset_us;
  return out;
}

}  // namespace paralab::exec
