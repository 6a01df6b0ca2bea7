// paralab interop — the cluster and the data-parallel size of a converted run.
#include "interop/cluster_size.hpp"

#include "ir/topology_loader.hpp"

namespace paralab::interop {

namespace {

const SourceLoc kOptions{"paralab import", 0, 0};

// The topology as written into the scenario: a shipped name as is, a file as an absolute path
// (the scenario may be written elsewhere). Returns its devices per node.
int64_t set_topology(ScenarioDraft& d, const ImportOptions& opts) {
  const std::string name = opts.topology.empty() ? kDefaultTopology : opts.topology;
  const auto path = resolve_topology(name, std::filesystem::current_path(), kOptions, "--topology");
  const Topology topo = load_topology(path);
  const bool is_file =
      name.find('/') != std::string::npos || (name.size() > 5 && name.compare(name.size() - 5, 5, ".toml") == 0);
  const std::string written = is_file ? std::filesystem::absolute(path).lexically_normal().string() : name;
  d.set("cluster.topology", toml_value(written),
        opts.topology.empty() ? std::string("paralab's default hardware; choose it with paralab import --topology")
                              : "--topology " + opts.topology + " (paralab import)");
  return topo.node.devices_per_node;
}

std::string count_origin(const GpuCount& c) {
  std::string out = c.per_node_origin;
  if (!c.nodes_origin.empty()) out += (out.empty() ? "" : ", ") + c.nodes_origin;
  return out;
}

// Nodes and devices per node: the options first, then the input, then one node.
std::pair<int64_t, int64_t> nodes_and_devices(ScenarioDraft& d, const GpuCount& input, const ImportOptions& opts,
                                              int64_t topo_devices) {
  if (opts.gpus) {
    const int64_t g = *opts.gpus;
    if (g <= topo_devices) return {1, g};
    if (g % topo_devices != 0)
      throw ConfigError(kOptions, "--gpus", std::to_string(g),
                        "not a whole number of nodes of " + d.text("cluster.topology") + " (" +
                            std::to_string(topo_devices) + " devices each)",
                        "at most " + std::to_string(topo_devices) + ", or a multiple of it");
    return {g / topo_devices, topo_devices};
  }
  const int64_t per_node = input.per_node.value_or(topo_devices);
  if (opts.nodes) return {*opts.nodes, per_node};
  if (input.per_node || input.nodes) return {input.nodes.value_or(1), per_node};
  d.note("the input names no GPU count: one node of " + d.text("cluster.topology") + " (" +
         std::to_string(topo_devices) + " GPUs) assumed; give paralab import --gpus N or --nodes N");
  return {1, topo_devices};
}

}  // namespace

void size_cluster(ScenarioDraft& d, const GpuCount& input, const ImportOptions& opts) {
  const int64_t topo_devices = set_topology(d, opts);
  const auto [nodes, per_node] = nodes_and_devices(d, input, opts, topo_devices);
  const std::string given = opts.gpus    ? "--gpus " + std::to_string(*opts.gpus) + " (paralab import)"
                            : opts.nodes ? "--nodes " + std::to_string(*opts.nodes) + " (paralab import)"
                                         : count_origin(input);
  if ((opts.gpus || opts.nodes) && (input.per_node || input.nodes))
    d.note("the input's GPU count (" + count_origin(input) + ") is replaced by " + given);
  d.set("cluster.nodes", std::to_string(nodes), given.empty() ? "one node" : given);
  if (per_node != topo_devices)
    d.set("cluster.devices_per_node", std::to_string(per_node), given.empty() ? "one node" : given);

  const int64_t world = nodes * per_node;
  const int64_t tp = d.integer("parallel.tensor").value_or(1), pp = d.integer("parallel.pipeline").value_or(1),
                cp = d.integer("parallel.context").value_or(1);
  const int64_t model_parallel = tp * pp * cp;
  if (model_parallel <= 0 || world % model_parallel != 0) {
    const std::string key = pp > 1 ? "parallel.pipeline" : tp > 1 ? "parallel.tensor" : "parallel.context";
    const SourceItem* at = d.origin_item(key);
    throw ConfigError(
        at ? located(at->loc) : SourceLoc{d.source, 0, 0}, at ? at->name : key, at ? at->value() : "",
        "tensor x pipeline x context = " + std::to_string(model_parallel) + " does not divide the run's " +
            std::to_string(world) + " GPUs (" + std::to_string(nodes) + " x " + std::to_string(per_node) +
            (given.empty() ? "" : ", from " + given) + ")",
        "paralab import ... --gpus N or --nodes N with N GPUs a multiple of " + std::to_string(model_parallel));
  }
  const int64_t data = world / model_parallel;
  d.note("data parallel size " + std::to_string(data) + " = " + std::to_string(world) + " GPUs / (tensor " +
         std::to_string(tp) + " x pipeline " + std::to_string(pp) + " x context " + std::to_string(cp) +
         "), as Megatron-LM derives it");
  const int64_t micro = d.integer("training.micro_batch_size").value_or(1);
  if (!d.has("training.global_batch_size")) {
    d.set("training.global_batch_size", std::to_string(micro * data),
          "Megatron-LM's default: micro batch size x data parallel size");
    return;
  }
  const int64_t global = *d.integer("training.global_batch_size");
  if (global % (micro * data) != 0) {
    const SourceItem* at = d.origin_item("training.global_batch_size");
    throw ConfigError(at ? located(at->loc) : SourceLoc{d.source, 0, 0}, at ? at->name : "training.global_batch_size",
                      std::to_string(global),
                      "not divisible by micro batch size x data parallel size = " + std::to_string(micro) + " x " +
                          std::to_string(data) + " (Megatron-LM refuses it too)",
                      "a multiple of " + std::to_string(micro * data) + ", or another GPU count (--gpus N)");
  }
}

}  // namespace paralab::interop
