// paralab exec — the runtime's failures: the first error recorded and every stream woken,
// what a stalled rank is waiting for (the watchdog's report), and injected faults.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "exec/error.hpp"
#include "exec/runtime.hpp"
#include "ir/enum_names.hpp"

namespace paralab::exec {

namespace {
std::string ranks_list(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}
}  // namespace

void Runtime::fail(const std::string& message, bool watchdog) {
  {
    std::lock_guard lk(mu_);
    if (!failed_.load()) {
      error_ = message;
      error_is_watchdog_ = watchdog;
      failed_.store(true, std::memory_order_release);
    }
  }
  for (StreamState& st : streams_) st.cv.notify_all();
}

std::string Runtime::describe_comm(const Op& op) const {
  const OpPlan& o = plan_.ops[op.id];
  std::string group_ranks = ranks_list(o.group);
  if (const auto* c = op.collective()) {
    return std::string(to_string(c->kind)) + "(" + std::string(to_string(c->op)) + ") of " + std::to_string(c->bytes) +
           " B over the " + std::string(to_string(c->group)) + " group " + group_ranks + " (tag " + std::to_string(c->tag) + ")";
  }
  if (const auto* p = op.p2p()) {
    std::string out;
    if (o.recv_from >= 0)
      out += "recv of " + std::to_string(p->bytes) + " B from rank " + std::to_string(o.group[static_cast<size_t>(o.recv_from)]);
    if (o.send_to >= 0)
      out += std::string(out.empty() ? "" : " and ") + "send of " + std::to_string(p->bytes) + " B to rank " +
             std::to_string(o.group[static_cast<size_t>(o.send_to)]);
    return out + " (" + std::string(to_string(p->group)) + " group, tag " + std::to_string(p->tag) + ")";
  }
  return "nothing";
}

std::string Runtime::describe_op_state(OpId id, int hops) const {
  const Op& op = g_.op(id);
  const StreamState& st = streams_[static_cast<size_t>(op.stream)];
  const uint8_t s = state_[id].load();
  if (s == 2) return "finished";
  if (s == 1) return "issued";
  const OpId cur = st.current.load();
  const auto phase = static_cast<Phase>(st.phase.load());
  if (cur == id) {
    if (phase == Phase::running) return is_comm(op.kind) ? "running: waits for " + describe_comm(op) : "running";
    const OpId w = st.waiting_on.load();
    if (w == kNoOp) return "about to start";
    std::string out = "waiting for op " + op_label(g_.op(w));
    if (hops + 1 < kStreams) out += ", which is " + describe_op_state(w, hops + 1);
    return out;
  }
  if (cur == kNoOp) return "not started (its stream has not begun)";
  std::string out = "not started: " + std::string(to_string(op.stream)) + " is still at op " + op_label(g_.op(cur));
  if (hops + 1 < kStreams) out += ", which is " + describe_op_state(cur, hops + 1);
  return out;
}

std::string Runtime::describe_streams() const {
  std::string out = "streams:";
  for (int s = 0; s < kStreams; ++s) {
    if (!plan_.stream_used[static_cast<size_t>(s)]) continue;
    const StreamState& st = streams_[static_cast<size_t>(s)];
    const OpId cur = st.current.load();
    const auto phase = static_cast<Phase>(st.phase.load());
    out += " " + std::string(to_string(static_cast<Stream>(s))) + "=";
    if (phase == Phase::finished) out += "finished";
    else if (cur == kNoOp) out += "idle";
    else if (phase == Phase::waiting) {
      const OpId w = st.waiting_on.load();
      out += "op " + std::to_string(cur) + " waiting for op " + (w == kNoOp ? std::string("?") : std::to_string(w));
    } else {
      out += "running op " + std::to_string(cur);
    }
    out += ";";
  }
  out.pop_back();
  return out;
}

void Runtime::apply_fault(const Op& op, int64_t step) {
  using A = FaultInjection::Action;
  if (!fault_op_ || *fault_op_ != op.id || step != opts_.fault.step) return;
  std::fprintf(stderr, "paralab execute: rank %lld: injecting fault (%s) at op %s\n", (long long)plan_.rank,
               opts_.fault.action == A::throw_error ? "throw" : opts_.fault.action == A::kill ? "kill"
               : opts_.fault.action == A::hang     ? "hang"
                                                   : "drop",
               op_label(op).c_str());
  std::fflush(stderr);
  switch (opts_.fault.action) {
    case A::throw_error: throw std::runtime_error("injected fault at op " + op_label(op));
    case A::kill: std::raise(SIGKILL); break;
    case A::hang:
      for (;;) {  // a stuck rank: never finishes, but leaves when the job is torn down
        check_cancel();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    default: break;
  }
}

}  // namespace paralab::exec
