// paralab exec — the IR's conventions for the memory-bound ops, once for every backend: an op's
// views and attributes mapped onto the kernels/ argument structs (docs/ir.md, "Memory-bound
// kernels"; docs/executor.md, "How the IR's conventions are executed"). A backend's family
// files take these arguments and add only what is its own: scratch and statistics buffers,
// fp32 gradient staging, streams, device-side scalars. Sharing them keeps the CPU and CUDA
// backends from drifting apart on a seed, a scale or a view order.
#pragma once

#include <cstdint>

#include "exec/backend.hpp"
#include "ir/model_shape.hpp"
#include "kernels/adamw.hpp"
#include "kernels/cast.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/dropout.hpp"
#include "kernels/dtype.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gelu.hpp"
#include "kernels/l2norm.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/loss_scale.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/sgd.hpp"
#include "kernels/softmax.hpp"
#include "kernels/swiglu.hpp"

namespace paralab::exec::args {

// Where an op runs: what its arguments depend on beyond its views.
struct OpSite {
  const RankPlan& plan;  // coordinates (tp, cp) and the data-parallel group
  const ModelShape& shape;
  const Scenario& scenario;
};

// The kernels/ storage type of an IR dtype (f32, bf16, f16; anything else is rejected by the
// kernels' dtype checks).
kernels::Dtype kernel_dtype(DType t);

// Throws InternalError naming the op when view i is missing or not `numel` elements.
void expect_numel(const OpCall& call, bool read, size_t i, int64_t numel, const char* what);

// Dropout seed of an op (docs/ir.md): training seed, layer, micro-batch, op name; attention-
// probability dropout also the tensor-parallel rank. Recomputation regenerates the same mask.
uint64_t dropout_seed(const Scenario& s, const Op& op, int64_t tp_index);

// Norms: reads {x, gamma, [beta]}, writes {y, stats}; backward reads {dy, x, stats, gamma, ...}.
// The statistics and gradient pointers are the backend's (fp32 scratch or the views).
kernels::LayerNormFwdArgs layernorm_fwd(const OpCall& c, float* mean, float* rstd);
kernels::RmsNormFwdArgs rmsnorm_fwd(const OpCall& c, float* rrms);
kernels::LayerNormBwdArgs layernorm_bwd(const OpCall& c, const float* mean, const float* rstd, void* dx, float* dgamma,
                                        float* dbeta, bool accumulate);
kernels::RmsNormBwdArgs rmsnorm_bwd(const OpCall& c, const float* rrms, void* dx, float* dgamma, bool accumulate);

// Activations and the scaled causal softmax of unfused attention (scores [batches * s, s]).
kernels::GeluFwdArgs gelu_fwd(const OpCall& c);
kernels::GeluBwdArgs gelu_bwd(const OpCall& c);
kernels::SwigluFwdArgs swiglu_fwd(const OpCall& c);  // checks the fc1 output is [rows, 2f]
kernels::SwigluBwdArgs swiglu_bwd(const OpCall& c);
kernels::SoftmaxFwdArgs softmax_fwd(const OpCall& c);
kernels::SoftmaxBwdArgs softmax_bwd(const OpCall& c);

// Dropout with the op's seed; a hidden-state dropout in a sequence-parallel region draws this
// tensor rank's slice of the full tensor's mask (stream offset tp * n).
kernels::DropoutFwdArgs dropout_fwd(const OpCall& c, const OpSite& at);
kernels::DropoutBwdArgs dropout_bwd(const OpCall& c);
kernels::DropoutAddFwdArgs dropout_add_fwd(const OpCall& c, const OpSite& at);
// dbias: the backend's fp32 bias gradient (null without a bias), accumulated or not.
kernels::DropoutAddBwdArgs dropout_add_bwd(const OpCall& c, float* dbias, bool accumulate);

// The vocab-parallel embedding over this tensor rank's vocabulary slice (checks the ids and
// the table; learned positions are the backend's), and its backward into dtable (fp32).
kernels::EmbeddingFwdArgs embedding_fwd(const OpCall& c, const OpSite& at);
kernels::EmbeddingBwdArgs embedding_bwd(const OpCall& c, const OpSite& at, float* dtable);
// The first id of this tensor rank's vocabulary slice.
int64_t vocab_start(const OpSite& at);
kernels::CeMaxArgs xent_max(const OpCall& c);

// A plain cast (not the accumulating copies, which are named grad_accumulate / dkv_accumulate).
kernels::CastArgs cast(const OpCall& c);
kernels::CheckOverflowArgs overflow_check(const OpCall& c, int32_t* found);
kernels::L2NormSqArgs grad_norm(const OpCall& c);  // accumulates into writes[0]

// The optimizer step's views (docs/ir.md: reads {grad, param, [master], [exp_avg], [found
// flag], [grad norm^2]}, writes {param, [master], momentum / exp_avg, [exp_avg_sq]}), checked.
struct OptimizerViews {
  int64_t n = 0;
  const void* grad = nullptr;
  kernels::Dtype grad_dtype = kernels::Dtype::f32;
  void* param = nullptr;  // the low-precision weights with mixed precision, else null
  kernels::Dtype param_dtype = kernels::Dtype::f32;
  float* master = nullptr;  // fp32 weights
  float* state1 = nullptr;  // exp_avg (Adam) or the momentum buffer (SGD)
  float* state2 = nullptr;  // exp_avg_sq (Adam)
  const float* found_flag = nullptr;  // fp16: the step's overflow flag
  const float* norm_sq = nullptr;     // clipping: the gradient's global sum of squares
};
OptimizerViews optimizer_views(const OpCall& c, const TrainingConfig& t);
// The update with grad_scale 1 and no loss scale: the backend sets the clipping coefficient,
// the loss scale and the overflow flag its own way.
kernels::AdamWArgs adamw(const OptimizerViews& v, const TrainingConfig& t, int64_t step);
kernels::SgdArgs sgd(const OptimizerViews& v, const TrainingConfig& t, int64_t step);

// The loss-scale state machine's configuration (growth interval in the op's aux).
kernels::LossScaleConfig loss_scale_config(const OpCall& c);

}  // namespace paralab::exec::args
