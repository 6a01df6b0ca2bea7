// paralab exec — what one rank runs, resolved from the IR once before the step: the stage
// graph, each op's views with the IR's sharding conventions applied (ZeRO shards, Megatron's
// pipeline slices), its group, position and peers, the communicators the whole job needs (one
// per group kind and stream for collectives, one per group kind for transfers), and how each
// buffer's contents are initialized (seeded random data, zeros, token ids). Backend-neutral.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/step_ir.hpp"

namespace paralab::exec {

// A TensorRef with the rank's offset applied (elements into the buffer).
struct ResolvedRef {
  BufferId buffer = 0;
  int64_t offset = 0;
  int64_t numel = 0;
  DType dtype = DType::f32;
};

// A communicator the job creates: collectives get one per (group kind, stream) so that streams
// running concurrently never interleave collectives on one communicator; point-to-point
// transfers of a group kind share one (they are matched by tag, and a pipeline send and its
// receive run on different streams).
// Every group kind also gets a base communicator (stream = Stream::kCount, "<group>/base") that
// no op uses: it exists on every layout, so verification checks every group kind's collectives.
struct CommKey {
  GroupKind group = GroupKind::tp;
  Stream stream = Stream::compute;  // collectives only; kCount = the group's base communicator
  bool p2p = false;
  bool operator==(const CommKey&) const = default;
  [[nodiscard]] std::string label() const;
};

struct OpPlan {
  std::vector<ResolvedRef> reads, writes;
  // Which outputs accumulate (gradients: weight/bias/norm/embedding grads, partial sums).
  std::vector<bool> accumulates;
  // Communication: the group (world ranks in group order), this rank's position, peers as
  // positions in the group (-1 = none), and the communicator slot (index into RankPlan::comms).
  std::vector<int64_t> group;
  int index = 0;
  int send_to = -1, recv_from = -1;
  int comm = -1;
};

enum class Fill : uint8_t {
  none,       // written before it is read
  zero,       // accumulators (gradients, partial sums) and resident gradients (zero_grad)
  weights,    // uniform with std 0.02 (Megatron's init_method_std), same on data-parallel replicas
  moment1,    // Adam exp_avg / SGD momentum: uniform +-1e-3
  moment2,    // Adam exp_avg_sq: uniform in [1e-8, 1e-6] (positive)
  token_ids,  // int32 in [0, vocab): the same on the tensor-parallel ranks of a micro-batch
  poison,     // --verify: NaN, so a read of unwritten memory shows up as NaN downstream
};

struct BufferPlan {
  Fill fill = Fill::none;
  uint64_t key = 0;            // seed of the counter-based generator
  int64_t global_offset = 0;   // element index of element 0 in the unsharded tensor
  int64_t vocab = 0;           // token_ids: exclusive upper bound
  // Two pieces (token ids under context parallelism: the rank's two sequence chunks, CpSplit):
  // elements [split, n) start at second_offset instead. 0: one piece.
  int64_t split = 0;
  int64_t second_offset = 0;
  // Element index in the unsharded tensor of element i.
  [[nodiscard]] int64_t global_index(int64_t i) const {
    return split > 0 && i >= split ? second_offset + (i - split) : global_offset + i;
  }
};

// How a tensor-parallel rank's parameter maps onto the unsharded tensor (Megatron's column-
// and row-parallel layers; the fused QKV and SwiGLU layouts of docs/ir.md).
enum class ParamSplit : uint8_t {
  none,         // replicated (norms, row-parallel biases, position table)
  rows,         // row-parallel weight, vocabulary-parallel table: rows tp*rows ..
  cols,         // column-parallel weight or bias: columns tp*cols ..
  qkv_cols,     // [local Q heads | local K groups | local V groups] of the full [Q | K | V]
  swiglu_cols,  // [local gate | local up] of the full [gate | up]
};

// One parameter (a [rows, cols] view of a weights bucket) and where it lives in the model.
struct ParamRegion {
  BufferId buffer = 0;         // the resident weights buffer (bucket)
  int64_t offset = 0;          // bucket element of local (0, 0) (unsharded bucket coordinates)
  int64_t rows = 0, cols = 0;  // local shape
  uint64_t key = 0;            // (seed, layer, role): the same on every layout
  bool gain = false;           // norm weight: near 1 (Megatron initializes it to 1)
  ParamSplit split = ParamSplit::none;
  int64_t tp = 0, tp_size = 1;
  int64_t heads = 0, groups = 0, head_dim = 0;  // qkv_cols: local heads and groups
  int64_t ffn = 0;                              // swiglu_cols: local ffn width
  std::string role;                             // "L3.qkv_w", for messages
};

struct RankPlan {
  const StepIR* ir = nullptr;
  const StepGraph* graph = nullptr;
  int64_t rank = 0;
  Coord coord;
  int64_t dp_index = 0, dp_size = 1;  // position in the gradient-reduction (dp x cp) group
  std::vector<OpPlan> ops;            // index = OpId
  std::vector<BufferPlan> buffers;    // index = BufferId
  std::vector<CommKey> comms;         // every communicator of the job, in creation order
  std::array<bool, kStreams> stream_used{};
  // The model's parameters inside the resident weights buffers, each with its identity in the
  // unsharded model: every layout of a scenario initializes the same model (Runtime::initialize).
  std::vector<ParamRegion> params;
  // Mixed precision: master (fp32) buffer b starts as a copy of weights[src] from src_offset.
  struct MasterCopy {
    BufferId master = 0, weights = 0;
    int64_t weights_offset = 0;
  };
  std::vector<MasterCopy> master_copies;
};

// Builds rank `rank`'s plan. `seed` is the training seed; `poison` marks unwritten buffers NaN.
RankPlan plan_rank(const StepIR& ir, int64_t rank, bool poison);

// Every communicator the job needs (union over the stages), in a fixed order.
std::vector<CommKey> job_comms(const StepIR& ir);

// Whether output `w` of `op` accumulates into its view (main-grad accumulation, partial sums).
bool accumulating_write(const Op& op, size_t w);

// The element shift of a view under the IR's sharding conventions (docs/ir.md): ZeRO shards
// are named by rank 0's view and rank i's is i*shard further; with Megatron's scatter/gather
// pipeline transfers, tensor-parallel rank i sends slice i.
int64_t view_shift(const StepIR& ir, const StepGraph& g, const Op& op, const TensorRef& t, bool is_read, int64_t rank);

// Conventions every backend applies the same way (docs/executor.md, "How the IR's conventions
// are executed"):
// xent_bwd's gradient scale: the loss scale in use / (T * micro-batches * the data-parallel group
// size). The loss scale is 1 without loss scaling; with fp16 it is the dynamic scaler's scale at
// the time, which starts at the op's `scale` (initial_loss_scale) and halves on an overflow and
// doubles after loss_scale_window clean steps (Megatron multiplies the loss by the current
// scale; the optimizer divides by the same). The last factor is Megatron's gradient averaging
// over data parallelism (DDP's gradient_scaling_factor = 1/(dp*cp)), which the IR's sum
// all-reduce leaves implicit.
double xent_grad_scale(const RankPlan& plan, const KernelAttrs& k, double loss_scale);
// The rows [first, last) of embedding_bwd's [T, h] input that add into the (replicated) position
// table's gradient: all of them, or under sequence parallelism this tensor rank's sequence slice
// (the IR all-reduces replicated gradients over tp under SP).
std::pair<int64_t, int64_t> position_grad_rows(const RankPlan& plan, int64_t T);
// The rows [first, last) of embedding_fwd's [T, h] output to which this tensor rank adds the
// learned positions: its 1/tp share of whole positions (rows are (position, batch entry)). The
// TP all-reduce / reduce-scatter that follows sums every position in exactly once, and the
// ranks do equal work (one rank adding them all would lag the others every micro-batch).
std::pair<int64_t, int64_t> position_add_rows(const RankPlan& plan, int64_t T);

// An attention op's geometry on this rank: batch, local query heads, local KV groups, head
// dim, local sequence, and the row strides of the qkv and context tensors (columns). Throws
// InternalError when the op's attributes disagree with the model shape.
struct AttentionDims {
  int64_t b, al, gl, d, s, qkv_cols, ctx_cols;
};
AttentionDims attention_dims(const ModelShape& m, const AttentionAttrs& a);
// The fields kernels::AttentionFwdArgs and AttentionBwdArgs share: packed operands and the
// geometry of `seq` positions of queries and keys (the local sequence, or a CP chunk of it).
template <class Args>
void set_attention_call(Args& a, const void* q, const void* k, const void* v, const AttentionDims& x, int64_t seq,
                        bool causal) {
  a.q = q;
  a.k = k;
  a.v = v;
  a.batch = x.b;
  a.heads = x.al;
  a.kv_heads = x.gl;
  a.seq = seq;
  a.head_dim = x.d;
  a.causal = causal;
}
// Megatron-LM's load-balanced split of the sequence over context parallelism
// (megatron/training/utils.py get_batch_on_this_cp_rank; docs/executor.md, "Context
// parallelism"): the sequence is cut into 2 cp chunks of c = S / (2 cp) positions and CP rank i
// holds chunks i and 2cp-1-i, in that order (local positions [0, c) and [c, 2c)). Under a causal
// mask every rank then does the same work at every ring step, which is what the simulator
// assumes (sim/compute/compute_attention.cpp). Without CP: the identity.
struct CpSplit {
  int64_t cp = 1, index = 0;
  int64_t chunk = 0;  // positions per chunk, c (without CP: the whole sequence)
  // The chunk (0 .. 2cp-1) that local half h (0 or 1) of CP rank `rank` holds.
  [[nodiscard]] int64_t chunk_of(int64_t rank, int h) const { return h == 0 ? rank : 2 * cp - 1 - rank; }
  // Global position of this rank's local position p (0 .. 2c-1).
  [[nodiscard]] int64_t position(int64_t p) const {
    if (cp == 1) return p;
    return p < chunk ? index * chunk + p : (2 * cp - 1 - index) * chunk + (p - chunk);
  }
};
// Throws InternalError when the local sequence does not split into two chunks.
CpSplit cp_split(const ModelShape& m, int64_t cp_index);

// This CP rank's sequence as row ranges of a [T, ...] activation whose rows are (position,
// batch entry): one piece without context parallelism, else its two chunks, each contiguous.
struct SeqPiece {
  int64_t row0 = 0, rows = 0;  // first row and row count
  int64_t position = 0;        // global position of row0
};
std::vector<SeqPiece> seq_pieces(const ModelShape& m, int64_t cp_index);

// Ring attention (Liu et al. 2023) on the load-balanced split: at ring step a.cp_step this rank
// holds the KV of CP rank src = (cp_idx - step) mod cp. The pair (query half hq, KV half hk)
// is the causal diagonal (same chunk), fully visible (the KV chunk is earlier) or masked.
enum class AttentionBlock { causal, full, masked };
AttentionBlock attention_block(const CpSplit& cp, const AttentionAttrs& a, int hq, int hk);
// Every pair of one ring step: without CP one causal block over the whole local sequence (the
// other entries masked), else the 2 x 2 pairs of the rank's chunks.
struct RingBlocks {
  int halves = 1;
  AttentionBlock blk[2][2]{};
  [[nodiscard]] bool visible(int hq, int hk) const { return blk[hq][hk] != AttentionBlock::masked; }
  [[nodiscard]] bool q_used(int hq) const { return visible(hq, 0) || visible(hq, 1); }
  [[nodiscard]] bool kv_used(int hk) const { return visible(0, hk) || visible(1, hk); }
};
RingBlocks ring_blocks(const CpSplit& cp, const AttentionAttrs& a);

// 64-bit mixing (splitmix64 finalizer) and a key from parts, for seeds.
uint64_t mix64(uint64_t x);
uint64_t seed_key(std::initializer_list<uint64_t> parts);
uint64_t hash_string(std::string_view s);

// "L3.mb1.fwd.qkv (op 57, compute)".
std::string op_label(const Op& op);

}  // namespace paralab::exec
