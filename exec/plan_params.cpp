// paralab exec — a rank plan's parameter regions (plan_params.hpp): every view of a weights
// bucket an op reads, named by (layer, role), so every layout initializes the same model.
#include "exec/plan_params.hpp"

#include <string>
#include <string_view>

namespace paralab::exec {

void add_param_regions(RankPlan& p, const std::map<std::string, BufferId>& by_name, uint64_t seed) {
  const StepIR& ir = *p.ir;
  const StepGraph& g = *p.graph;
  const ModelShape& m = ir.shape;
  auto add_param = [&](const Op& op, size_t read, const char* role, ParamSplit split, bool gain, int32_t layer) {
    if (read >= op.reads.size()) return;
    const TensorRef& t = op.reads[read];
    BufferId bucket = t.buffer;
    const Buffer& b = g.buffer(t.buffer);
    if (!(b.resident && b.category == MemCategory::weights)) {  // ZeRO-3: the gathered copy
      const std::string suffix = ".gathered";
      if (b.name.size() <= suffix.size() || b.name.compare(b.name.size() - suffix.size(), suffix.size(), suffix) != 0) return;
      auto it = by_name.find(b.name.substr(0, b.name.size() - suffix.size()));
      if (it == by_name.end()) return;
      bucket = it->second;
    }
    for (const ParamRegion& r : p.params)
      if (r.buffer == bucket && r.offset == t.offset) return;  // seen (recomputation, micro-batches)
    ParamRegion r;
    r.buffer = bucket;
    r.offset = t.offset;
    r.rows = t.rank >= 2 ? t.shape[0] : 1;
    r.cols = t.rank >= 2 ? t.shape[1] : t.shape[0];
    r.key = seed_key({seed, hash_string("param"), static_cast<uint64_t>(layer + 2), hash_string(role)});
    r.gain = gain;
    r.split = split;
    r.tp = p.coord.tp;
    r.tp_size = m.tp;
    r.heads = m.heads_local();
    r.groups = m.groups_local();
    r.head_dim = m.head_dim;
    r.ffn = m.ffn_local();
    r.role = (layer < 0 ? std::string("emb") : layer >= m.layers ? std::string("head") : "L" + std::to_string(layer)) + "." + role;
    p.params.push_back(r);
  };
  const ParamSplit fc1_split = m.activation == Activation::swiglu ? ParamSplit::swiglu_cols : ParamSplit::cols;
  for (const Op& op : g.ops) {
    const std::string_view name = op.name;
    switch (op.kind) {
      case OpKind::gemm: {
        const GemmAttrs& gm = *op.gemm();
        if (gm.role != GemmRole::linear_fwd) break;
        const bool bias = gm.bias;
        if (name == "qkv") {
          add_param(op, 1, "qkv_w", ParamSplit::qkv_cols, false, op.layer);
          if (bias) add_param(op, 2, "qkv_b", ParamSplit::qkv_cols, false, op.layer);
        } else if (name == "proj") {
          add_param(op, 1, "proj_w", ParamSplit::rows, false, op.layer);
        } else if (name == "fc1") {
          add_param(op, 1, "fc1_w", fc1_split, false, op.layer);
          if (bias) add_param(op, 2, "fc1_b", fc1_split, false, op.layer);
        } else if (name == "fc2") {
          add_param(op, 1, "fc2_w", ParamSplit::rows, false, op.layer);
        } else if (name == "output_layer") {  // tied: the word embedding (the last stage's copy too)
          if (m.tied) add_param(op, 1, "word_emb", ParamSplit::rows, false, -1);
          else add_param(op, 1, "out_w", ParamSplit::rows, false, op.layer);
        }
        break;
      }
      case OpKind::layernorm_fwd:
      case OpKind::rmsnorm_fwd: {
        const std::string n(name);
        add_param(op, 1, (n + "_w").c_str(), ParamSplit::none, true, op.layer);
        add_param(op, 2, (n + "_b").c_str(), ParamSplit::none, false, op.layer);
        break;
      }
      case OpKind::dropout_add_fwd:
        if (name == "bias_dropout_add1") add_param(op, 2, "proj_b", ParamSplit::none, false, op.layer);
        if (name == "bias_dropout_add2") add_param(op, 2, "fc2_b", ParamSplit::none, false, op.layer);
        break;
      case OpKind::embedding_fwd:
        add_param(op, 1, "word_emb", ParamSplit::rows, false, -1);
        add_param(op, 2, "pos_emb", ParamSplit::none, false, -1);
        break;
      default: break;
    }
  }
}

}  // namespace paralab::exec
