// paralab — per-rank mode's ranks: the hardware each rank of a cluster draw gets ([variation],
// ir/variation.hpp) and the classes of ranks that are provably identical under it.
//
// Ranks are coloured by (stage, hardware) and the colouring is refined until it is equitable:
// two ranks of one class have, for every group kind, groups holding the same multiset of
// classes (Weisfeiler-Lehman colour refinement). In the engine's max-plus semantics (an op
// starts when its stream predecessor and deps have finished; a call when every member has
// arrived) ranks of one class then reach every event at the same time, so one simulated rank
// per class is exact for compute and synchronization; docs/simulator.md "Per-rank mode" says
// what the network's shared links make approximate. Without variation there is one class per
// stage (the representative mode).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "ir/variation.hpp"

#include "ir/op_kind.hpp"
#include "ir/step_ir.hpp"

namespace paralab::sim {

// One rank's hardware in a draw: how long its compute ops take relative to the cluster's
// topology (per op kind), and which topology's compute model times them (0: the cluster's,
// g + 1: node group g's).
struct RankHardware {
  std::array<double, static_cast<size_t>(OpKind::kCount)> slowdown{};  // duration multiplier per kind
  uint32_t compute_model = 0;
  double nic_fraction = 1.0;  // its node's network interfaces' bandwidth left ([[variation.link]])
  // Per micro-batch, its attention work relative to unpacked sequences (packed documents,
  // variation.seq_length_distribution; empty: 1). Shared by the ranks of a data-parallel replica.
  std::vector<double> attention_work;

  bool operator<(const RankHardware& o) const;
  bool operator==(const RankHardware& o) const = default;
};

// Ops whose work grows with the square of the document length: the attention core (fused, or
// the unfused softmax and probability dropout); the unfused score GEMMs are plain GEMMs here.
constexpr bool scales_with_attention(OpKind k) {
  return k == OpKind::attention_fwd || k == OpKind::attention_bwd || k == OpKind::softmax_fwd ||
         k == OpKind::softmax_bwd || k == OpKind::dropout_fwd || k == OpKind::dropout_bwd;
}

// The attention work of one packed micro-batch of `sequences` sequences of `seq_length` tokens,
// relative to one document per sequence: the mean over its sequences of sum(length^2) /
// seq_length^2, documents drawn from `v` and packed until each sequence is full (the last one
// cut). Deterministic in `key`.
double packed_attention_work(const VariationConfig& v, int64_t seq_length, int64_t sequences, uint64_t key);

// The hardware of every rank of ir.layout for sample `sample` of variation `v`: per-GPU speed
// from a normal draw of mean 1 and sd gpu_speed_cv (seeded by variation.seed + sample and the
// rank, so independent of thread count and order; clipped to [0.25, 4]), stragglers and node
// groups applied on top. Speed s divides every compute duration.
std::vector<RankHardware> draw_hardware(const StepIR& ir, const VariationConfig& v, int64_t sample);

// Every member of a tensor-parallel group gets the group's slowest hardware: per op kind the
// largest slowdown, the smallest NIC fraction (SimulationConfig::pace_tensor_groups).
void pace_tensor_groups(const StepIR& ir, std::vector<RankHardware>& hw);

struct RankClass {
  int64_t rep = 0;       // the lowest rank of the class: the one simulated
  int64_t stage = 0;
  int64_t ranks = 0;     // how many ranks it stands for
  RankHardware hardware;
  // Per group kind but world (which holds every class): the distinct classes in the rep's group
  // (sorted; every group holding a rank of this class holds the same ones), an id of that group
  // type, and how many groups of the kind are of this type (0: the rank is in no such group).
  std::array<std::vector<uint32_t>, static_cast<size_t>(GroupKind::kCount)> peers;
  std::array<uint32_t, static_cast<size_t>(GroupKind::kCount)> group_type{};
  std::array<int64_t, static_cast<size_t>(GroupKind::kCount)> groups_of_type{};
};

struct RankClasses {
  std::vector<uint32_t> class_of;   // per rank
  std::vector<RankClass> classes;   // ascending rep (and so stage)
  int refinement_rounds = 0;
};

// Classes of `hw` (one entry per rank of ir.layout).
RankClasses rank_classes(const StepIR& ir, const std::vector<RankHardware>& hw);

}  // namespace paralab::sim
