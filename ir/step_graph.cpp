// paralab — StepGraph helpers: names, labels, and per-rank wire volumes of communication.
#include "ir/step_graph.hpp"

namespace paralab {

std::string_view to_string(Stream s) {
  static constexpr std::string_view n[] = {"compute", "tp_comm", "cp_comm", "dp_comm", "pp_send", "pp_recv", "d2h", "h2d", "host", "pp_send_grad", "pp_recv_grad"};
  return n[static_cast<size_t>(s)];
}
std::string_view to_string(Phase p) {
  static constexpr std::string_view n[] = {"fwd", "bwd", "recompute", "optimizer", "wgrad"};
  return n[static_cast<size_t>(p)];
}
std::string_view to_string(MemCategory c) {
  static constexpr std::string_view n[] = {"weights", "grads", "optimizer", "activations", "buffers"};
  return n[static_cast<size_t>(c)];
}
std::string_view to_string(GemmRole r) {
  static constexpr std::string_view n[] = {"linear_fwd", "linear_dgrad", "linear_wgrad", "attn_qk", "attn_pv",
                                           "attn_dp",    "attn_dv",      "attn_dq",      "attn_dk"};
  return n[static_cast<size_t>(r)];
}
std::string_view to_string(CollKind k) {
  static constexpr std::string_view n[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
                                           "reduce",     "gather",     "scatter"};
  return n[static_cast<size_t>(k)];
}
std::string_view to_string(ReduceOp r) { return r == ReduceOp::sum ? "sum" : "max"; }

std::string Op::full_name() const {
  std::string out;
  if (layer >= 0) out += "L" + std::to_string(layer) + ".";
  if (microbatch >= 0) out += "mb" + std::to_string(microbatch) + ".";
  if (chunk > 0) out += "c" + std::to_string(chunk) + ".";
  out += to_string(phase);
  out += ".";
  out += name;
  return out;
}

// Bytes one rank sends for this op with the bandwidth-optimal algorithms (Thakur et al. 2005;
// Patarasuk & Yuan 2009 for the ring all-reduce's 2(n-1)/n N).
double Op::wire_bytes(int64_t n) const {
  if (const auto* c = collective()) {
    if (n <= 1) return 0;
    const double N = static_cast<double>(c->bytes);
    const double f = static_cast<double>(n - 1) / static_cast<double>(n);
    switch (c->kind) {
      case CollKind::all_reduce: return 2 * f * N;
      case CollKind::all_gather:
      case CollKind::reduce_scatter:
      case CollKind::all_to_all: return f * N;
      case CollKind::broadcast:
      case CollKind::reduce: return N;
      case CollKind::gather:  // the root's side: it receives (scatter: sends) every other member's part
      case CollKind::scatter: return f * N;
    }
  }
  if (const auto* p = p2p()) {
    const double N = static_cast<double>(p->bytes);
    return p->send_offset != 0 ? N : 0.0;
  }
  return 0;
}

}  // namespace paralab
