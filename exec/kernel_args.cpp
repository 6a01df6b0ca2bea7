// paralab exec — the memory-bound ops' kernel arguments, the same for every backend
// (kernel_args.hpp).
#include "exec/kernel_args.hpp"

#include <algorithm>
#include <string>
#include <string_view>

#include "ir/error.hpp"

namespace paralab::exec::args {

kernels::Dtype kernel_dtype(DType t) {
  switch (t) {
    case DType::f32: return kernels::Dtype::f32;
    case DType::bf16: return kernels::Dtype::bf16;
    case DType::f16: return kernels::Dtype::f16;
    default: break;
  }
  return static_cast<kernels::Dtype>(-1);  // rejected by the kernels' dtype checks
}

void expect_numel(const OpCall& call, bool read, size_t i, int64_t numel, const char* what) {
  const auto& refs = read ? call.plan.reads : call.plan.writes;
  if (i >= refs.size())
    throw InternalError("op " + op_label(call.op) + ": missing " + (read ? "read " : "write ") + std::to_string(i) +
                        " (" + what + ")");
  if (refs[i].numel != numel)
    throw InternalError("op " + op_label(call.op) + ": " + what + " has " + std::to_string(refs[i].numel) +
                        " elements, expected " + std::to_string(numel));
}

uint64_t dropout_seed(const Scenario& s, const Op& op, int64_t tp_index) {
  const bool attention_probs = std::string_view(op.name) == "attn_dropout" || std::string_view(op.name) == "attn_dropout_bwd";
  return seed_key({static_cast<uint64_t>(s.training.seed), hash_string("dropout"), static_cast<uint64_t>(op.layer + 1),
                   static_cast<uint64_t>(op.microbatch + 1), hash_string(op.name),
                   attention_probs ? static_cast<uint64_t>(tp_index) + 1 : 0});
}

namespace {

const KernelAttrs& attrs(const OpCall& c) { return *c.op.kernel(); }
kernels::Dtype in_dtype(const OpCall& c) { return kernel_dtype(c.plan.reads[0].dtype); }

// Hidden-state dropouts in sequence-parallel regions draw the tensor-parallel rank's slice of
// the full tensor's mask; attention-probability dropout has its own seed per tensor rank.
uint64_t dropout_offset(const OpSite& at, const Op& op, int64_t n) {
  if (std::string_view(op.name) == "attn_dropout") return 0;
  return at.shape.sp ? static_cast<uint64_t>(at.plan.coord.tp * n) : 0;
}

}  // namespace

kernels::LayerNormFwdArgs layernorm_fwd(const OpCall& c, float* mean, float* rstd) {
  const KernelAttrs& k = attrs(c);
  kernels::LayerNormFwdArgs x;
  x.x = c.reads[0];
  x.gamma = c.reads[1];
  x.beta = c.reads.size() > 2 ? c.reads[2] : nullptr;
  x.y = c.writes[0];
  x.mean = mean;
  x.rstd = rstd;
  x.rows = k.rows;
  x.cols = k.cols;
  x.eps = k.eps;
  x.dtype = in_dtype(c);
  return x;
}

kernels::RmsNormFwdArgs rmsnorm_fwd(const OpCall& c, float* rrms) {
  const KernelAttrs& k = attrs(c);
  kernels::RmsNormFwdArgs x;
  x.x = c.reads[0];
  x.gamma = c.reads[1];
  x.y = c.writes[0];
  x.rrms = rrms;
  x.rows = k.rows;
  x.cols = k.cols;
  x.eps = k.eps;
  x.dtype = in_dtype(c);
  return x;
}

kernels::LayerNormBwdArgs layernorm_bwd(const OpCall& c, const float* mean, const float* rstd, void* dx, float* dgamma,
                                        float* dbeta, bool accumulate) {
  const KernelAttrs& k = attrs(c);
  kernels::LayerNormBwdArgs x;
  x.dy = c.reads[0];
  x.x = c.reads[1];
  x.gamma = c.reads[3];
  x.mean = mean;
  x.rstd = rstd;
  x.dx = dx;
  x.dgamma = dgamma;
  x.dbeta = dbeta;
  x.accumulate = accumulate;
  x.rows = k.rows;
  x.cols = k.cols;
  x.dtype = in_dtype(c);
  return x;
}

kernels::RmsNormBwdArgs rmsnorm_bwd(const OpCall& c, const float* rrms, void* dx, float* dgamma, bool accumulate) {
  const KernelAttrs& k = attrs(c);
  kernels::RmsNormBwdArgs x;
  x.dy = c.reads[0];
  x.x = c.reads[1];
  x.gamma = c.reads[3];
  x.rrms = rrms;
  x.dx = dx;
  x.dgamma = dgamma;
  x.accumulate = accumulate;
  x.rows = k.rows;
  x.cols = k.cols;
  x.dtype = in_dtype(c);
  return x;
}

kernels::GeluFwdArgs gelu_fwd(const OpCall& c) {
  kernels::GeluFwdArgs x;
  x.x = c.reads[0];
  x.y = c.writes[0];
  x.rows = attrs(c).rows;
  x.cols = attrs(c).cols;
  x.dtype = in_dtype(c);
  return x;
}

kernels::GeluBwdArgs gelu_bwd(const OpCall& c) {
  kernels::GeluBwdArgs x;
  x.dy = c.reads[0];
  x.x = c.reads[1];
  x.dx = c.writes[0];
  x.rows = attrs(c).rows;
  x.cols = attrs(c).cols;
  x.dtype = in_dtype(c);
  return x;
}

kernels::SwigluFwdArgs swiglu_fwd(const OpCall& c) {
  const KernelAttrs& k = attrs(c);
  expect_numel(c, true, 0, k.rows * 2 * k.cols, "fc1 output");
  kernels::SwigluFwdArgs x;
  x.x = c.reads[0];
  x.y = c.writes[0];
  x.rows = k.rows;
  x.f = k.cols;
  x.dtype = in_dtype(c);
  return x;
}

kernels::SwigluBwdArgs swiglu_bwd(const OpCall& c) {
  kernels::SwigluBwdArgs x;
  x.dy = c.reads[0];
  x.x = c.reads[1];
  x.dx = c.writes[0];
  x.rows = attrs(c).rows;
  x.f = attrs(c).cols;
  x.dtype = in_dtype(c);
  return x;
}

// Scores [batches * s, s]: KernelAttrs rows = batches * s, cols = s (self-attention, sq = sk).
kernels::SoftmaxFwdArgs softmax_fwd(const OpCall& c) {
  const KernelAttrs& k = attrs(c);
  kernels::SoftmaxFwdArgs x;
  x.x = c.reads[0];
  x.y = c.writes[0];
  x.batches = k.rows / k.cols;
  x.sq = k.cols;
  x.sk = k.cols;
  x.scale = k.scale;
  x.causal = true;
  x.dtype = in_dtype(c);
  return x;
}

kernels::SoftmaxBwdArgs softmax_bwd(const OpCall& c) {
  const KernelAttrs& k = attrs(c);
  kernels::SoftmaxBwdArgs x;
  x.dy = c.reads[0];
  x.y = c.reads[1];
  x.dx = c.writes[0];
  x.batches = k.rows / k.cols;
  x.sq = k.cols;
  x.sk = k.cols;
  x.scale = k.scale;
  x.dtype = in_dtype(c);
  return x;
}

kernels::DropoutFwdArgs dropout_fwd(const OpCall& c, const OpSite& at) {
  const KernelAttrs& k = attrs(c);
  const int64_t n = k.rows * k.cols;
  kernels::DropoutFwdArgs x;
  x.x = c.reads[0];
  x.y = c.writes[0];
  x.mask = c.writes.size() > 1 ? static_cast<uint8_t*>(c.writes[1]) : nullptr;
  x.n = n;
  x.p = k.p;
  x.seed = dropout_seed(at.scenario, c.op, at.plan.coord.tp);
  x.offset = dropout_offset(at, c.op, n);
  x.dtype = in_dtype(c);
  return x;
}

kernels::DropoutBwdArgs dropout_bwd(const OpCall& c) {
  const KernelAttrs& k = attrs(c);
  kernels::DropoutBwdArgs x;
  x.dy = c.reads[0];
  x.mask = static_cast<const uint8_t*>(c.reads[1]);
  x.dx = c.writes[0];
  x.n = k.rows * k.cols;
  x.p = k.p;
  x.dtype = in_dtype(c);
  return x;
}

// reads {x, residual, [bias]}, writes {out, [mask]}.
kernels::DropoutAddFwdArgs dropout_add_fwd(const OpCall& c, const OpSite& at) {
  const KernelAttrs& k = attrs(c);
  kernels::DropoutAddFwdArgs x;
  x.x = c.reads[0];
  x.residual = c.reads[1];
  x.bias = c.reads.size() > 2 ? c.reads[2] : nullptr;
  x.out = c.writes[0];
  x.mask = c.writes.size() > 1 ? static_cast<uint8_t*>(c.writes[1]) : nullptr;
  x.rows = k.rows;
  x.cols = k.cols;
  x.p = k.p;
  x.seed = dropout_seed(at.scenario, c.op, at.plan.coord.tp);
  x.offset = dropout_offset(at, c.op, k.rows * k.cols);
  x.dtype = in_dtype(c);
  return x;
}

// reads {dout, [mask]}, writes {dx, [d bias]}.
kernels::DropoutAddBwdArgs dropout_add_bwd(const OpCall& c, float* dbias, bool accumulate) {
  const KernelAttrs& k = attrs(c);
  kernels::DropoutAddBwdArgs x;
  x.dout = c.reads[0];
  x.mask = c.reads.size() > 1 ? static_cast<const uint8_t*>(c.reads[1]) : nullptr;
  x.dx = c.writes[0];
  x.dbias = dbias;
  x.accumulate = accumulate;
  x.rows = k.rows;
  x.cols = k.cols;
  x.p = k.p;
  x.dtype = in_dtype(c);
  return x;
}

int64_t vocab_start(const OpSite& at) { return at.plan.coord.tp * at.shape.vocab_local(); }

// reads {token ids [T], this rank's vocabulary slice of the table [V, h], [positions]}, writes
// the hidden states [T, h]: rows of ids outside the slice are zero (summed over tensor ranks).
kernels::EmbeddingFwdArgs embedding_fwd(const OpCall& c, const OpSite& at) {
  const KernelAttrs& k = attrs(c);
  const int64_t T = k.rows, h = k.cols, V = at.shape.vocab_local();
  expect_numel(c, true, 0, T, "token ids");
  expect_numel(c, true, 1, V * h, "word embedding table");
  kernels::EmbeddingFwdArgs x;
  x.ids = static_cast<const int32_t*>(c.reads[0]);
  x.table = c.reads[1];
  x.out = c.writes[0];
  x.rows = T;
  x.hidden = h;
  x.vocab_start = vocab_start(at);
  x.vocab_end = x.vocab_start + V;
  x.dtype = kernel_dtype(c.plan.writes[0].dtype);
  return x;
}

// reads {d hidden [T, h], token ids}: a scatter-add into dtable (an fp32 view accumulates; the
// backend's fp32 scratch for another dtype was zeroed).
kernels::EmbeddingBwdArgs embedding_bwd(const OpCall& c, const OpSite& at, float* dtable) {
  const KernelAttrs& k = attrs(c);
  expect_numel(c, true, 0, k.rows * k.cols, "embedding gradient");
  kernels::EmbeddingBwdArgs x;
  x.ids = static_cast<const int32_t*>(c.reads[1]);
  x.dout = c.reads[0];
  x.dtable = dtable;
  x.accumulate = true;
  x.rows = k.rows;
  x.hidden = k.cols;
  x.vocab_start = vocab_start(at);
  x.vocab_end = x.vocab_start + at.shape.vocab_local();
  x.dtype = in_dtype(c);
  return x;
}

// logits [T, V] -> the local row max [T] (all-reduced with max next).
kernels::CeMaxArgs xent_max(const OpCall& c) {
  kernels::CeMaxArgs x;
  x.logits = c.reads[0];
  x.row_max = static_cast<float*>(c.writes[0]);
  x.rows = attrs(c).rows;
  x.vocab = attrs(c).cols;
  x.dtype = in_dtype(c);
  return x;
}

kernels::CastArgs cast(const OpCall& c) {
  kernels::CastArgs x;
  x.src = c.reads[0];
  x.src_dtype = in_dtype(c);
  x.dst = c.writes[0];
  x.dst_dtype = kernel_dtype(c.plan.writes[0].dtype);
  x.n = std::min(c.plan.reads[0].numel, c.plan.writes[0].numel);
  return x;
}

kernels::CheckOverflowArgs overflow_check(const OpCall& c, int32_t* found) {
  kernels::CheckOverflowArgs x;
  x.buf = c.reads[0];
  x.n = c.plan.reads[0].numel;
  x.dtype = in_dtype(c);
  x.found_inf = found;
  return x;
}

kernels::L2NormSqArgs grad_norm(const OpCall& c) {
  kernels::L2NormSqArgs x;
  x.buf = c.reads[0];
  x.n = c.plan.reads[0].numel;
  x.dtype = in_dtype(c);
  x.out = static_cast<float*>(c.writes[0]);
  x.accumulate = true;
  return x;
}

OptimizerViews optimizer_views(const OpCall& c, const TrainingConfig& t) {
  const bool mixed = is_mixed(t.precision), adam = t.optimizer == Optimizer::adam;
  const bool fp16 = t.precision == Precision::fp16, clip = t.clip_grad > 0;
  const auto& o = c.plan;
  OptimizerViews v;
  v.n = o.reads[0].numel;
  const size_t want_reads = 2 + mixed + adam + fp16 + clip, want_writes = 2 + mixed + adam;
  if (o.reads.size() != want_reads || o.writes.size() != want_writes)
    throw InternalError("op " + op_label(c.op) + ": optimizer has " + std::to_string(o.reads.size()) + " reads and " +
                        std::to_string(o.writes.size()) + " writes, expected " + std::to_string(want_reads) + " and " +
                        std::to_string(want_writes));
  for (const ResolvedRef& w : o.writes)
    if (w.numel != v.n) throw InternalError("op " + op_label(c.op) + ": optimizer views differ in size");
  if (!mixed && o.writes[0].dtype != DType::f32)
    throw InternalError("op " + op_label(c.op) + ": fp32 training with non-fp32 weights");
  size_t wi = 1;
  v.master = mixed ? static_cast<float*>(c.writes[wi++]) : static_cast<float*>(c.writes[0]);
  v.state1 = static_cast<float*>(c.writes[wi++]);
  v.state2 = adam ? static_cast<float*>(c.writes[wi++]) : nullptr;
  v.grad = c.reads[0];
  v.grad_dtype = kernel_dtype(o.reads[0].dtype);
  v.param = mixed ? c.writes[0] : nullptr;
  v.param_dtype = kernel_dtype(o.writes[0].dtype);
  size_t ri = 2 + mixed + adam;
  if (fp16) v.found_flag = static_cast<const float*>(c.reads[ri++]);
  if (clip) v.norm_sq = static_cast<const float*>(c.reads[ri++]);
  return v;
}

kernels::AdamWArgs adamw(const OptimizerViews& v, const TrainingConfig& t, int64_t step) {
  kernels::AdamWArgs x;
  x.master = v.master;
  x.exp_avg = v.state1;
  x.exp_avg_sq = v.state2;
  x.grad = v.grad;
  x.grad_dtype = v.grad_dtype;
  x.param = v.param;
  x.param_dtype = v.param_dtype;
  x.n = v.n;
  x.lr = static_cast<float>(t.lr);
  x.beta1 = static_cast<float>(t.adam_beta1);
  x.beta2 = static_cast<float>(t.adam_beta2);
  x.eps = static_cast<float>(t.adam_eps);
  x.weight_decay = static_cast<float>(t.weight_decay);
  x.step = step;
  return x;
}

kernels::SgdArgs sgd(const OptimizerViews& v, const TrainingConfig& t, int64_t step) {
  kernels::SgdArgs x;
  x.master = v.master;
  x.momentum_buf = v.state1;
  x.grad = v.grad;
  x.grad_dtype = v.grad_dtype;
  x.param = v.param;
  x.param_dtype = v.param_dtype;
  x.n = v.n;
  x.lr = static_cast<float>(t.lr);
  x.momentum = static_cast<float>(t.sgd_momentum);
  x.weight_decay = static_cast<float>(t.weight_decay);
  x.step = step;
  return x;
}

kernels::LossScaleConfig loss_scale_config(const OpCall& c) {
  kernels::LossScaleConfig cfg;
  cfg.growth_interval = static_cast<int32_t>(std::max<int64_t>(attrs(c).aux, 1));
  return cfg;
}

}  // namespace paralab::exec::args
