// paralab — the compute model's op families. A new family: a compute_<name>.cpp with its cost
// function and one row here.
#include "sim/compute/compute_model.hpp"

namespace paralab::sim {

namespace {
constexpr OpKind kGemm[] = {OpKind::gemm};
constexpr OpKind kAttention[] = {OpKind::attention_fwd, OpKind::attention_bwd};
constexpr OpKind kMemoryBound[] = {
    OpKind::layernorm_fwd, OpKind::layernorm_bwd, OpKind::rmsnorm_fwd, OpKind::rmsnorm_bwd,
    OpKind::gelu_fwd,      OpKind::gelu_bwd,      OpKind::swiglu_fwd,  OpKind::swiglu_bwd,
    OpKind::softmax_fwd,   OpKind::softmax_bwd,   OpKind::dropout_fwd, OpKind::dropout_bwd,
    OpKind::dropout_add_fwd, OpKind::dropout_add_bwd, OpKind::rope_fwd, OpKind::rope_bwd,
    OpKind::embedding_fwd, OpKind::embedding_bwd, OpKind::xent_max,    OpKind::xent_sum,
    OpKind::xent_loss,     OpKind::xent_bwd,      OpKind::cast};
constexpr OpKind kOptimizer[] = {OpKind::optimizer_step, OpKind::grad_norm, OpKind::overflow_check,
                                 OpKind::scaler_update};
constexpr OpKind kCopy[] = {OpKind::copy};
constexpr OpKind kLaunch[] = {OpKind::launch};

const CostFamily kFamilies[] = {
    {"gemm", kGemm, &gemm_model_us},
    {"attention", kAttention, &attention_model_us},
    {"memory_bound", kMemoryBound, &memory_bound_model_us},
    {"optimizer", kOptimizer, &optimizer_model_us},
    {"host_copy", kCopy, &copy_model_us},
    {"host_launch", kLaunch, &launch_model_us},
};
}  // namespace

std::span<const CostFamily> cost_families() { return kFamilies; }

}  // namespace paralab::sim
