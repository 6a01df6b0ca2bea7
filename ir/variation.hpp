// paralab — how ranks of one cluster differ ([variation] of a scenario, docs/config.md):
// per-GPU compute speed drawn from a seeded distribution, stragglers, degraded network links and
// node groups of another topology. Loaded once at the edge with the scenario (ir/variation.cpp); the
// simulator turns it into per-rank hardware (sim/engine/rank_classes.hpp) and simulates every
// rank that differs (docs/simulator.md "Per-rank mode").
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "ir/error.hpp"
#include "ir/op_kind.hpp"
#include "ir/raw_config.hpp"
#include "ir/topology.hpp"

namespace paralab {

// One slow rank or node: its compute ops (of `op_kinds`, every compute op when empty) take
// `slowdown` times as long. Exactly one of rank and node is set.
struct Straggler {
  std::optional<int64_t> rank, node;
  double slowdown = 1.0;
  std::string op_kinds;  // comma-separated OpKind names (ir/op_kind.hpp), e.g. "gemm,attention_fwd"

  // Whether ops of kind `k` are slowed (communication ops never are).
  [[nodiscard]] bool slows(OpKind k) const;
};

// A node's network interfaces (one, or all) at a fraction of their bandwidth: a degraded NIC or
// cable, or 0: down, its traffic moved to the node's other NICs (over the node's switch to the
// device on another NIC, as NCCL's PXN does).
struct LinkVariation {
  int64_t node = 0;
  int64_t nic = -1;  // which of the node's NICs; -1: all of them
  double bandwidth_fraction = 1.0;
};

// Nodes first_node .. last_node (inclusive) built from another topology file (e.g. an older
// GPU generation): their devices compute at that topology's speeds; the network is the
// cluster's.
struct NodeGroup {
  int64_t first_node = 0, last_node = 0;
  std::string topology;  // name in topologies/ or a path, as cluster.topology
  Topology resolved;     // loaded with the scenario
};

// How documents fill a packed sequence of seq_length tokens (attention masked per document, as
// with flash attention's variable-length kernels): none (one document per sequence), or
// documents of exponential (mean document_mean_tokens) or uniform (document_min_tokens ..
// document_max_tokens) lengths, packed until the sequence is full (the last one cut).
enum class SeqLengthDistribution : uint8_t { none, exponential, uniform };
std::string_view to_string(SeqLengthDistribution d);

struct VariationConfig {
  double gpu_speed_cv = 0;  // coefficient of variation of per-GPU compute speed (0: identical)
  int64_t seed = 1;         // of the per-GPU draws; sample i of --samples uses seed + i
  std::vector<Straggler> stragglers;
  std::vector<LinkVariation> links;
  std::vector<NodeGroup> node_groups;
  SeqLengthDistribution seq_length_distribution = SeqLengthDistribution::none;
  int64_t document_mean_tokens = 0, document_min_tokens = 1, document_max_tokens = 0;

  // True when some input makes ranks differ (the simulator then runs per-rank mode).
  [[nodiscard]] bool any() const {
    return gpu_speed_cv > 0 || !stragglers.empty() || !links.empty() || !node_groups.empty() ||
           seq_length_distribution != SeqLengthDistribution::none;
  }
};

// Reads the `[[variation.straggler]]`, `[[variation.link]]` and `[[variation.node_group]]` arrays of a scenario file into `v` (node groups' topologies resolved against `dir`). Throws
// ConfigError for any other array, unknown keys, bad values and, per entry, what is allowed.
void read_variation_arrays(VariationConfig& v, const std::map<std::string, RawArray>& arrays,
                           const std::filesystem::path& dir, const std::string& file);

// Checks entries against the cluster (ranks and nodes that exist, groups that do not overlap,
// node-group devices per node equal to the cluster's). `world` ranks on `nodes` nodes.
void validate_variation(const VariationConfig& v, int64_t world, int64_t nodes, int64_t devices_per_node,
                        const std::string& file);


}  // namespace paralab
