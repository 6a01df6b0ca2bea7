// paralab — the rank layout: rank <-> (tp, cp, dp, pp) coordinates and communication groups.
// Megatron-LM's default order "tp-cp-ep-dp-pp" (megatron/core/parallel_state.py), tensor
// parallel fastest:  rank = tp + T*(cp + C*(dp + D*pp)).  With 8 GPUs per node and T = 8 a
// tensor-parallel group is exactly one node; pipeline stages are the slowest coordinate.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace paralab {

// Communication group kinds. `dp` is Megatron's data-parallel group *with* context-parallel
// replicas (dp*cp ranks), the group gradients are reduced and optimizer state is sharded over.
// `embd` joins the first and last pipeline stage (tied embedding gradients); `mp` is the
// model-parallel group (tp*pp ranks with the same cp, dp); `world` is every rank.
enum class GroupKind : uint8_t { tp, cp, dp, pp, embd, mp, world, kCount };

std::string_view to_string(GroupKind g);

// Groups whose members all run one pipeline stage's graph (same op ids on every member);
// `pp` pairs neighbouring stages and `embd`, `mp`, `world` join stages.
constexpr bool within_stage(GroupKind g) { return g == GroupKind::tp || g == GroupKind::cp || g == GroupKind::dp; }

struct Coord {
  int64_t tp = 0, cp = 0, dp = 0, pp = 0;
  bool operator==(const Coord&) const = default;
};

class Layout {
 public:
  Layout(int64_t tp, int64_t cp, int64_t dp, int64_t pp, int64_t devices_per_node);

  [[nodiscard]] int64_t tp() const { return tp_; }
  [[nodiscard]] int64_t cp() const { return cp_; }
  [[nodiscard]] int64_t dp() const { return dp_; }  // pure data-parallel degree
  [[nodiscard]] int64_t pp() const { return pp_; }
  [[nodiscard]] int64_t world() const { return tp_ * cp_ * dp_ * pp_; }
  [[nodiscard]] int64_t devices_per_node() const { return per_node_; }

  [[nodiscard]] Coord coord(int64_t rank) const;
  [[nodiscard]] int64_t rank(const Coord& c) const;
  [[nodiscard]] int64_t node_of(int64_t rank) const { return rank / per_node_; }
  [[nodiscard]] int64_t local_device(int64_t rank) const { return rank % per_node_; }
  [[nodiscard]] int64_t stage_of(int64_t rank) const { return coord(rank).pp; }
  // The rank whose graph stands for every rank of a pipeline stage (tp = cp = dp = 0).
  [[nodiscard]] int64_t representative(int64_t stage) const { return rank({0, 0, 0, stage}); }

  [[nodiscard]] int64_t group_size(GroupKind g) const;
  // Members of the group of kind `g` that contains `rank`, in group order.
  [[nodiscard]] std::vector<int64_t> members(GroupKind g, int64_t rank) const;
  // Position of `rank` within its group of kind `g` (0 .. group_size-1).
  [[nodiscard]] int64_t index_in_group(GroupKind g, int64_t rank) const;
  // The member at position `index` of the group of kind `g` that contains `rank`.
  [[nodiscard]] int64_t member_at(GroupKind g, int64_t rank, int64_t index) const;
  // Every group of kind `g` (each a member list), ordered by their first member.
  [[nodiscard]] std::vector<std::vector<int64_t>> all_groups(GroupKind g) const;
  // The groups of kind `g` whose members all lie in pipeline stage `stage` (tp, cp, dp).
  [[nodiscard]] std::vector<std::vector<int64_t>> groups_in_stage(GroupKind g, int64_t stage) const;

 private:
  int64_t tp_, cp_, dp_, pp_, per_node_;
};

}  // namespace paralab
