// paralab — the StepGraph: every op of one optimizer step on one rank (forward, backward,
// recompute, optimizer, collectives, pipeline transfers), the buffers they read and write,
// their memory events, and their dependencies. Simulator and executor both consume it; op ids
// are stable (same scenario -> same ids), so their results join.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "ir/dtype.hpp"
#include "ir/layout.hpp"
#include "ir/op_kind.hpp"

namespace paralab {

using OpId = uint32_t;
using BufferId = uint32_t;
constexpr OpId kNoOp = UINT32_MAX;

// Streams with CUDA semantics: ops on one stream run in order; cross-stream order comes only
// from explicit dependencies. Tensor-parallel collectives have their own stream so Megatron's
// overlap of the input-gradient all-reduce with the weight-gradient GEMM can be expressed.
// Optimizer offload (docs/offload.md): d2h and h2d are the device's two copy engines (one per
// direction, as CUDA drives them), host is the optimizer's threads on the host's cores.
// Pipeline transfers: activations on pp_send / pp_recv, gradients on pp_send_grad / pp_recv_grad,
// so the two directions never queue behind each other (Megatron-LM posts both at once).
enum class Stream : uint8_t {
  compute, tp_comm, cp_comm, dp_comm, pp_send, pp_recv, d2h, h2d, host, pp_send_grad, pp_recv_grad, kCount
};
constexpr bool off_device(Stream s) { return s == Stream::d2h || s == Stream::h2d || s == Stream::host; }
constexpr int kStreams = static_cast<int>(Stream::kCount);
std::string_view to_string(Stream s);

// weight_grad: a backward's weight-gradient GEMMs when a zero-bubble schedule defers them (W).
enum class Phase : uint8_t { forward, backward, recompute, optimizer, weight_grad };
std::string_view to_string(Phase p);

// What a buffer holds, for the memory breakdown (weights, gradients, optimizer state,
// activations, communication/workspace buffers).
enum class MemCategory : uint8_t { weights, grads, optimizer, activations, buffers, kCount };
constexpr int kMemCategories = static_cast<int>(MemCategory::kCount);
std::string_view to_string(MemCategory c);

struct Buffer {
  std::string name;
  int64_t elements = 0;
  DType dtype = DType::f32;
  MemCategory category = MemCategory::activations;
  // Resident buffers (weights, gradients, optimizer state) exist before the step starts and
  // after it ends (steady state); the others are allocated by one op and freed after another.
  bool resident = false;
  int64_t params = 0;  // model parameters this buffer holds (weights only), for counting
  bool host = false;   // in the host's (pinned) memory, not the device's: optimizer offload

  [[nodiscard]] int64_t bytes() const { return elements * bytes_of(dtype); }
};

// A view of a buffer: `shape` elements starting `offset` elements in, row-major.
struct TensorRef {
  BufferId buffer = 0;
  int64_t offset = 0;
  std::array<int64_t, 4> shape{1, 1, 1, 1};
  uint8_t rank = 1;
  DType dtype = DType::f32;

  [[nodiscard]] int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= shape[static_cast<size_t>(i)];
    return n;
  }
  [[nodiscard]] int64_t bytes() const { return numel() * bytes_of(dtype); }
};

// How a GEMM's operands map onto the model's buffers (the executor uses it to pick strides).
enum class GemmRole : uint8_t {
  linear_fwd,    // Y[T,out] = X[T,in] W[in,out]
  linear_dgrad,  // dX[T,in] = dY[T,out] W^T
  linear_wgrad,  // dW[in,out] += X^T dY
  attn_qk,       // S[b*a, sq, sk] = Q K^T        (unfused attention, Q/K/V inside the qkv buffer)
  attn_pv,       // O[b*a, sq, d] = P V
  attn_dp,       // dP = dO V^T
  attn_dv,       // dV = P^T dO
  attn_dq,       // dQ = dS K
  attn_dk,       // dK = dS^T Q
};
std::string_view to_string(GemmRole r);
// A linear layer's product (forward or either gradient), not one of unfused attention's.
constexpr bool is_linear(GemmRole r) {
  return r == GemmRole::linear_fwd || r == GemmRole::linear_dgrad || r == GemmRole::linear_wgrad;
}

// C[m,n] (+)= op(A)[m,k] op(B)[k,n], `batch` times.
struct GemmAttrs {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool trans_a = false, trans_b = false;
  bool accumulate = false;  // C += ... (weight-gradient accumulation over micro-batches)
  // linear_fwd: reads[2] is a bias added to every row; linear_wgrad: writes[1] receives the
  // bias gradient (column sums of dY), accumulated like the weight gradient.
  bool bias = false;
  MathMode math = MathMode::f32;
  GemmRole role = GemmRole::linear_fwd;
};

// Fused attention core (or one ring-attention step of it under context parallelism).
struct AttentionAttrs {
  int64_t batch = 0, heads = 0, kv_heads = 0, sq = 0, sk = 0, head_dim = 0;
  bool causal = true;
  int32_t cp_step = 0, cp_size = 1;  // ring step and ring size; the KV block is (cp_idx - step) mod cp
  MathMode math = MathMode::bf16;
};

// reduce, gather, scatter are rooted at the group's first member (nn.DataParallel's device 0).
enum class CollKind : uint8_t { all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, gather, scatter };
enum class ReduceOp : uint8_t { sum, max };
std::string_view to_string(CollKind k);
std::string_view to_string(ReduceOp r);

// bytes: all_reduce = buffer size per rank; all_gather = output size; reduce_scatter = input
// size (output bytes/n); all_to_all = total sent per rank; broadcast = buffer size.
struct CollectiveAttrs {
  CollKind kind = CollKind::all_reduce;
  GroupKind group = GroupKind::tp;
  ReduceOp op = ReduceOp::sum;
  int64_t bytes = 0;
  uint32_t tag = 0;  // the same on every member: matches a collective across stage graphs
};

// Point-to-point: offsets are positions in the group's ring relative to this rank (+1 = next
// pipeline stage / next context-parallel rank), 0 = none. `sendrecv` has both.
struct P2PAttrs {
  GroupKind group = GroupKind::pp;
  int32_t send_offset = 0;
  int32_t recv_offset = 0;
  int64_t bytes = 0;
  uint32_t tag = 0;  // equal on the sending and the receiving side
  // > 1: Megatron's scatter/gather optimization (Narayanan et al. 2021, Sec. 4.1): each
  // tensor-parallel rank sends only slice `tp_index` of `slices` of the tensor it reads; the
  // receiver all-gathers the slices over the tensor-parallel group.
  int32_t slices = 1;
};

// Per-kernel scalars the executor needs (dropout probability, norm epsilon, rows/cols).
// For *_bwd norm kernels aux = 1 means "accumulate dx into the residual gradient".
struct KernelAttrs {
  int64_t rows = 0, cols = 0;
  float p = 0.0f;       // dropout probability
  float eps = 0.0f;     // norm epsilon
  float scale = 1.0f;   // softmax scale, loss scale, etc.
  int64_t aux = 0;      // kernel-specific (vocab start for embedding/xent, seq for rope, ...)
};

using OpAttrs = std::variant<std::monostate, GemmAttrs, AttentionAttrs, CollectiveAttrs, P2PAttrs, KernelAttrs>;

struct Op {
  OpId id = 0;
  OpKind kind = OpKind::gemm;
  Stream stream = Stream::compute;
  Phase phase = Phase::forward;
  const char* name = "";   // short static name, e.g. "qkv"; full_name() adds the labels
  int32_t layer = -1;      // global layer index; -1 for none, embedding = -1, head = num_layers
  int32_t microbatch = -1;
  int16_t chunk = 0;       // virtual pipeline chunk on this stage
  std::vector<TensorRef> reads, writes;
  OpAttrs attrs;
  double flops = 0;        // executed FLOPs (includes recomputation)
  double model_flops = 0;  // the part that counts as model FLOPs (Korthikanti et al. Eq. 7)
  double bytes = 0;        // memory traffic (reads + writes), bytes
  std::vector<OpId> deps;  // ops (usually on other streams) that must finish first
  std::vector<BufferId> allocs;  // allocated just before the op starts
  std::vector<BufferId> frees;   // freed just after the op finishes

  [[nodiscard]] const CollectiveAttrs* collective() const { return std::get_if<CollectiveAttrs>(&attrs); }
  [[nodiscard]] const P2PAttrs* p2p() const { return std::get_if<P2PAttrs>(&attrs); }
  [[nodiscard]] const GemmAttrs* gemm() const { return std::get_if<GemmAttrs>(&attrs); }
  [[nodiscard]] const AttentionAttrs* attention() const { return std::get_if<AttentionAttrs>(&attrs); }
  [[nodiscard]] const KernelAttrs* kernel() const { return std::get_if<KernelAttrs>(&attrs); }
  // "L3.mb5.fwd.qkv" (layer, micro-batch, phase, name), for traces and reports.
  [[nodiscard]] std::string full_name() const;
  // Bytes this op puts on the wire per rank (ring volumes: all-reduce 2(n-1)/n N, ...).
  [[nodiscard]] double wire_bytes(int64_t group_size) const;
};

// One pipeline stage's graph; every rank of the stage runs it (see StepIR::graph_for).
struct StepGraph {
  int64_t stage = 0;
  int64_t model_params = 0;  // parameters of the model replica one rank of this stage holds
  std::vector<Op> ops;  // index == OpId, a topological order
  std::vector<Buffer> buffers;
  std::array<std::vector<OpId>, kStreams> streams;  // program order per stream

  [[nodiscard]] const Op& op(OpId id) const { return ops[id]; }
  [[nodiscard]] const Buffer& buffer(BufferId id) const { return buffers[id]; }
};

}  // namespace paralab

namespace paralab {
// Tags of the collectives that join pipeline stages (matched across stage graphs).
constexpr uint32_t kTagEmbeddingGrads = 1;  // tied word-embedding gradients, first + last stage
constexpr uint32_t kTagFoundInf = 2;        // fp16 loss scaling: any inf/NaN anywhere
constexpr uint32_t kTagGradNorm = 3;        // global gradient norm for clipping
constexpr uint32_t kTagP2PBase = 16;        // pipeline transfers: kTagP2PBase + unique index
}  // namespace paralab
