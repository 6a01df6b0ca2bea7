// paralab — streaming JSON writer for the StepIR.
#include "ir/ir_json.hpp"

#include <iomanip>
#include <variant>

#include "ir/enum_names.hpp"

namespace paralab {

namespace {

class Writer {
 public:
  explicit Writer(std::ostream& o) : o_(o) { o_ << std::setprecision(17); }
  void str(std::string_view s) {
    o_ << '"';
    for (char c : s) {
      if (c == '"' || c == '\\') o_ << '\\' << c;
      else if (static_cast<unsigned char>(c) < 0x20) o_ << "\\u00" << "0123456789abcdef"[(c >> 4) & 0xf] << "0123456789abcdef"[c & 0xf];
      else o_ << c;
    }
    o_ << '"';
  }
  template <class T>
  void kv(std::string_view k, const T& v, bool comma = true) {
    str(k);
    o_ << ':';
    // Anything string-like, string literals (char arrays) included, is quoted.
    if constexpr (std::is_convertible_v<const T&, std::string_view>)
      str(v);
    else if constexpr (std::is_same_v<T, bool>)
      o_ << (v ? "true" : "false");
    else
      o_ << v;
    if (comma) o_ << ',';
  }
  template <class C>
  void list(std::string_view k, const C& c, bool comma = true) {
    str(k);
    o_ << ":[";
    bool first = true;
    for (const auto& x : c) {
      if (!first) o_ << ',';
      first = false;
      o_ << x;
    }
    o_ << ']';
    if (comma) o_ << ',';
  }
  std::ostream& raw() { return o_; }

 private:
  std::ostream& o_;
};

void tensors(Writer& w, std::string_view key, const std::vector<TensorRef>& ts) {
  w.str(key);
  w.raw() << ":[";
  for (size_t i = 0; i < ts.size(); ++i) {
    const TensorRef& t = ts[i];
    if (i) w.raw() << ',';
    w.raw() << '{';
    w.kv("buffer", t.buffer);
    w.kv("offset", t.offset);
    std::vector<int64_t> shape(t.shape.begin(), t.shape.begin() + t.rank);
    w.list("shape", shape);
    w.kv("dtype", enum_to_string(t.dtype), false);
    w.raw() << '}';
  }
  w.raw() << "],";
}

void attrs(Writer& w, const Op& op, const StepIR& ir, std::optional<int64_t> rank) {
  w.str("attrs");
  w.raw() << ":{";
  std::visit(
      [&](const auto& a) {
        using A = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<A, GemmAttrs>) {
          w.kv("m", a.m), w.kv("n", a.n), w.kv("k", a.k), w.kv("batch", a.batch);
          w.kv("trans_a", a.trans_a), w.kv("trans_b", a.trans_b), w.kv("accumulate", a.accumulate);
          w.kv("bias", a.bias), w.kv("math", enum_to_string(a.math)), w.kv("role", to_string(a.role), false);
        } else if constexpr (std::is_same_v<A, AttentionAttrs>) {
          w.kv("batch", a.batch), w.kv("heads", a.heads), w.kv("kv_heads", a.kv_heads), w.kv("sq", a.sq);
          w.kv("sk", a.sk), w.kv("head_dim", a.head_dim), w.kv("causal", a.causal), w.kv("cp_step", a.cp_step);
          w.kv("cp_size", a.cp_size), w.kv("math", enum_to_string(a.math), false);
        } else if constexpr (std::is_same_v<A, CollectiveAttrs>) {
          w.kv("collective", to_string(a.kind)), w.kv("group", to_string(a.group)), w.kv("reduce", to_string(a.op));
          w.kv("bytes", a.bytes), w.kv("tag", a.tag, rank.has_value());
          if (rank) w.list("group_ranks", ir.group_of(*rank, op), false);
        } else if constexpr (std::is_same_v<A, P2PAttrs>) {
          w.kv("group", to_string(a.group)), w.kv("send_offset", a.send_offset), w.kv("recv_offset", a.recv_offset);
          w.kv("bytes", a.bytes), w.kv("slices", a.slices), w.kv("tag", a.tag, rank.has_value());
          if (rank) w.kv("send_peer", ir.peer_of(*rank, op, true)), w.kv("recv_peer", ir.peer_of(*rank, op, false), false);
        } else if constexpr (std::is_same_v<A, KernelAttrs>) {
          w.kv("rows", a.rows), w.kv("cols", a.cols), w.kv("p", a.p), w.kv("eps", a.eps), w.kv("scale", a.scale);
          w.kv("aux", a.aux, false);
        }
      },
      op.attrs);
  w.raw() << "},";
}

void graph(Writer& w, const StepIR& ir, const StepGraph& g, std::optional<int64_t> rank) {
  w.raw() << '{';
  w.kv("stage", g.stage);
  std::vector<int64_t> ranks;
  if (rank) ranks.push_back(*rank);
  else
    for (int64_t r = 0; r < ir.layout.world(); ++r)
      if (ir.layout.stage_of(r) == g.stage) ranks.push_back(r);
  w.list("ranks", ranks);
  w.kv("model_params", g.model_params);
  w.str("buffers");
  w.raw() << ":[";
  for (size_t i = 0; i < g.buffers.size(); ++i) {
    const Buffer& b = g.buffers[i];
    if (i) w.raw() << ',';
    w.raw() << '{';
    w.kv("id", i), w.kv("name", b.name), w.kv("elements", b.elements), w.kv("dtype", enum_to_string(b.dtype));
    w.kv("bytes", b.bytes()), w.kv("category", to_string(b.category)), w.kv("resident", b.resident, b.host);
    if (b.host) w.kv("host", true, false);
    w.raw() << '}';
  }
  w.raw() << "],";
  w.str("ops");
  w.raw() << ":[";
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (i) w.raw() << ",\n";
    w.raw() << '{';
    w.kv("id", op.id), w.kv("name", op.full_name()), w.kv("kind", enum_to_string(op.kind));
    w.kv("stream", to_string(op.stream)), w.kv("phase", to_string(op.phase)), w.kv("layer", op.layer);
    w.kv("microbatch", op.microbatch), w.kv("chunk", op.chunk);
    tensors(w, "reads", op.reads);
    tensors(w, "writes", op.writes);
    attrs(w, op, ir, rank);
    w.kv("flops", op.flops), w.kv("model_flops", op.model_flops), w.kv("bytes", op.bytes);
    w.list("deps", op.deps), w.list("allocs", op.allocs), w.list("frees", op.frees, false);
    w.raw() << '}';
  }
  w.raw() << "]}";
}

}  // namespace

void write_ir_json(std::ostream& out, const StepIR& ir, std::optional<int64_t> rank) {
  Writer w(out);
  const Layout& L = ir.layout;
  w.raw() << '{';
  w.kv("format", "paralab-ir/1");
  w.kv("scenario", ir.scenario.name);
  w.kv("world_size", L.world());
  w.raw() << "\"layout\":{";
  w.kv("tp", L.tp()), w.kv("cp", L.cp()), w.kv("dp", L.dp()), w.kv("pp", L.pp());
  w.kv("devices_per_node", L.devices_per_node(), false);
  w.raw() << "},";
  w.kv("rank_mapping", "rank = tp + TP*(cp + CP*(dp + DP*pp)) (Megatron-LM order tp-cp-dp-pp, tp fastest)");
  w.str("graphs");
  w.raw() << ":[\n";
  if (rank) {
    graph(w, ir, ir.graph_for(*rank), rank);
  } else {
    for (size_t i = 0; i < ir.stages.size(); ++i) {
      if (i) w.raw() << ",\n";
      graph(w, ir, ir.stages[i], std::nullopt);
    }
  }
  w.raw() << "]}\n";
}

}  // namespace paralab
