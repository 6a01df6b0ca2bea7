// paralab — spellings of enum values (scenario keys use Megatron-LM's words where it has one).
#include "ir/enum_names.hpp"

#include <array>

namespace paralab {

#define PARALAB_NAMES(E, ...)                                                \
  template <>                                                                \
  NameTable<E> names<E>() {                                                  \
    static constexpr std::pair<std::string_view, E> table[] = {__VA_ARGS__}; \
    return table;                                                            \
  }

PARALAB_NAMES(DType, {"f32", DType::f32}, {"bf16", DType::bf16}, {"f16", DType::f16},
              {"fp8", DType::fp8}, {"i32", DType::i32}, {"u8", DType::u8})
PARALAB_NAMES(MathMode, {"fp32", MathMode::f32}, {"tf32", MathMode::tf32}, {"bf16", MathMode::bf16},
              {"fp16", MathMode::f16}, {"fp8", MathMode::fp8}, {"mxfp8", MathMode::mxfp8},
              {"nvfp4", MathMode::nvfp4})
PARALAB_NAMES(Precision, {"fp32", Precision::fp32}, {"tf32", Precision::tf32},
              {"fp16", Precision::fp16}, {"bf16", Precision::bf16}, {"fp8", Precision::fp8},
              {"mxfp8", Precision::mxfp8}, {"nvfp4", Precision::nvfp4})
PARALAB_NAMES(Activation, {"gelu", Activation::gelu}, {"swiglu", Activation::swiglu})
PARALAB_NAMES(Normalization, {"layernorm", Normalization::layernorm},
              {"rmsnorm", Normalization::rmsnorm})
PARALAB_NAMES(PositionEmbedding, {"learned_absolute", PositionEmbedding::learned_absolute},
              {"rope", PositionEmbedding::rope})
PARALAB_NAMES(Optimizer, {"adam", Optimizer::adam}, {"sgd", Optimizer::sgd})
PARALAB_NAMES(Recompute, {"none", Recompute::none}, {"selective", Recompute::selective},
              {"full", Recompute::full})
PARALAB_NAMES(AttentionImpl, {"flash", AttentionImpl::flash}, {"unfused", AttentionImpl::unfused})
PARALAB_NAMES(Schedule, {"gpipe", Schedule::gpipe}, {"1f1b", Schedule::one_f_one_b},
              {"interleaved", Schedule::interleaved}, {"zb-h1", Schedule::zb_h1}, {"zb-h2", Schedule::zb_h2})
PARALAB_NAMES(CollectiveAlgo, {"auto", CollectiveAlgo::automatic}, {"ring", CollectiveAlgo::ring},
              {"tree", CollectiveAlgo::tree}, {"hierarchical", CollectiveAlgo::hierarchical})
PARALAB_NAMES(OffloadParam, {"none", OffloadParam::none}, {"cpu", OffloadParam::cpu})
PARALAB_NAMES(DataParallelImpl, {"ddp", DataParallelImpl::ddp}, {"dataparallel", DataParallelImpl::dataparallel})
PARALAB_NAMES(SeqLengthDistribution, {"none", SeqLengthDistribution::none},
              {"exponential", SeqLengthDistribution::exponential}, {"uniform", SeqLengthDistribution::uniform})
PARALAB_NAMES(RouterScore, {"softmax", RouterScore::softmax}, {"sigmoid", RouterScore::sigmoid})
PARALAB_NAMES(LoadBalancing, {"aux_loss", LoadBalancing::aux_loss}, {"seq_aux_loss", LoadBalancing::seq_aux_loss},
              {"none", LoadBalancing::none})
PARALAB_NAMES(TokenDispatcher, {"allgather", TokenDispatcher::allgather}, {"alltoall", TokenDispatcher::alltoall})
PARALAB_NAMES(RoutingModel, {"balanced", RoutingModel::balanced}, {"zipf", RoutingModel::zipf},
              {"hot_expert", RoutingModel::hot_expert}, {"measured", RoutingModel::measured})
PARALAB_NAMES(DeviceKind, {"gpu", DeviceKind::gpu}, {"cpu", DeviceKind::cpu})
PARALAB_NAMES(IntraFabric, {"nvswitch", IntraFabric::nvswitch}, {"pcie", IntraFabric::pcie},
              {"shm", IntraFabric::shm})
PARALAB_NAMES(NetworkKind, {"none", NetworkKind::none}, {"fat_tree", NetworkKind::fat_tree},
              {"rail_optimized", NetworkKind::rail_optimized})
PARALAB_NAMES(OpKind, {"gemm", OpKind::gemm}, {"attention_fwd", OpKind::attention_fwd},
              {"attention_bwd", OpKind::attention_bwd}, {"layernorm_fwd", OpKind::layernorm_fwd},
              {"layernorm_bwd", OpKind::layernorm_bwd}, {"rmsnorm_fwd", OpKind::rmsnorm_fwd},
              {"rmsnorm_bwd", OpKind::rmsnorm_bwd}, {"gelu_fwd", OpKind::gelu_fwd},
              {"gelu_bwd", OpKind::gelu_bwd}, {"swiglu_fwd", OpKind::swiglu_fwd},
              {"swiglu_bwd", OpKind::swiglu_bwd}, {"softmax_fwd", OpKind::softmax_fwd},
              {"softmax_bwd", OpKind::softmax_bwd}, {"dropout_fwd", OpKind::dropout_fwd},
              {"dropout_bwd", OpKind::dropout_bwd}, {"dropout_add_fwd", OpKind::dropout_add_fwd},
              {"dropout_add_bwd", OpKind::dropout_add_bwd}, {"rope_fwd", OpKind::rope_fwd},
              {"rope_bwd", OpKind::rope_bwd}, {"embedding_fwd", OpKind::embedding_fwd},
              {"embedding_bwd", OpKind::embedding_bwd}, {"xent_max", OpKind::xent_max},
              {"xent_sum", OpKind::xent_sum}, {"xent_loss", OpKind::xent_loss},
              {"xent_bwd", OpKind::xent_bwd}, {"cast", OpKind::cast},
              {"grad_norm", OpKind::grad_norm}, {"overflow_check", OpKind::overflow_check},
              {"scaler_update", OpKind::scaler_update}, {"optimizer_step", OpKind::optimizer_step}, {"copy", OpKind::copy}, {"launch", OpKind::launch},
              {"collective", OpKind::collective}, {"send", OpKind::send}, {"recv", OpKind::recv},
              {"sendrecv", OpKind::sendrecv})
PARALAB_NAMES(GroupKind, {"tp", GroupKind::tp}, {"cp", GroupKind::cp}, {"dp", GroupKind::dp},
              {"pp", GroupKind::pp}, {"embd", GroupKind::embd}, {"mp", GroupKind::mp},
              {"world", GroupKind::world})

// The trace's spellings (ir/step_graph.cpp's to_string), so that a [[calibration.correction]]
// row reads as the ops it stands for.
PARALAB_NAMES(CollKind, {"all_reduce", CollKind::all_reduce}, {"all_gather", CollKind::all_gather},
              {"reduce_scatter", CollKind::reduce_scatter}, {"all_to_all", CollKind::all_to_all},
              {"broadcast", CollKind::broadcast},
              {"reduce", CollKind::reduce}, {"gather", CollKind::gather}, {"scatter", CollKind::scatter})
PARALAB_NAMES(Phase, {"fwd", Phase::forward}, {"bwd", Phase::backward}, {"recompute", Phase::recompute},
              {"optimizer", Phase::optimizer},
              {"wgrad", Phase::weight_grad})

PARALAB_NAMES(CostKind, {"time", CostKind::time}, {"dispatch", CostKind::dispatch}, {"handoff", CostKind::handoff})
PARALAB_NAMES(OpFamily, {"compute", OpFamily::compute}, {"comm", OpFamily::comm})
PARALAB_NAMES(Span, {"intra_node", Span::intra_node}, {"inter_node", Span::inter_node})

#undef PARALAB_NAMES

std::string_view to_string(DType v) { return enum_to_string(v); }
std::string_view to_string(MathMode v) { return enum_to_string(v); }
std::string_view to_string(Precision v) { return enum_to_string(v); }
std::string_view to_string(Activation v) { return enum_to_string(v); }
std::string_view to_string(Normalization v) { return enum_to_string(v); }
std::string_view to_string(PositionEmbedding v) { return enum_to_string(v); }
std::string_view to_string(Optimizer v) { return enum_to_string(v); }
std::string_view to_string(Recompute v) { return enum_to_string(v); }
std::string_view to_string(AttentionImpl v) { return enum_to_string(v); }
std::string_view to_string(Schedule v) { return enum_to_string(v); }
std::string_view to_string(CollectiveAlgo v) { return enum_to_string(v); }
std::string_view to_string(OffloadParam v) { return enum_to_string(v); }
std::string_view to_string(DataParallelImpl v) { return enum_to_string(v); }
std::string_view to_string(SeqLengthDistribution v) { return enum_to_string(v); }
std::string_view to_string(RoutingModel v) { return enum_to_string(v); }
std::string_view to_string(DeviceKind v) { return enum_to_string(v); }
std::string_view to_string(IntraFabric v) { return enum_to_string(v); }
std::string_view to_string(NetworkKind v) { return enum_to_string(v); }
std::string_view to_string(OpKind v) { return enum_to_string(v); }
std::string_view to_string(GroupKind v) { return enum_to_string(v); }
std::optional<OpKind> op_kind_from_string(std::string_view s) { return enum_from_string<OpKind>(s); }

}  // namespace paralab
