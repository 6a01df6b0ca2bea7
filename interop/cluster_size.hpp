// paralab interop — the cluster of a converted run: the topology (--topology, else dgx-h100),
// nodes and devices per node from the options, else from the input (torchrun's
// --nproc_per_node / --nnodes, NeMo's trainer.devices / trainer.num_nodes), else one node. Then
// Megatron-LM's checks of the layout against it: tensor x pipeline x context divides the GPUs,
// data = GPUs / (tensor x pipeline x context), and the global batch is a multiple of
// micro batch x data (micro batch x data when not given).
#pragma once

#include <optional>
#include <string>

#include "interop/draft.hpp"
#include "interop/import_options.hpp"

namespace paralab::interop {

struct GpuCount {
  std::optional<int64_t> per_node, nodes;
  std::string per_node_origin, nodes_origin;  // "--nproc_per_node 8 (train.sh:22)"
};

// Sets cluster.topology, cluster.nodes, cluster.devices_per_node (when not the topology's) and,
// when the input has none, training.global_batch_size. Throws ConfigError naming the
// arguments and options involved when the GPUs do not fit the layout.
void size_cluster(ScenarioDraft& d, const GpuCount& input, const ImportOptions& opts);

}  // namespace paralab::interop
