// paralab — the [variation] arrays of a scenario: one field table per entry kind, read and
// checked against the cluster (ir/variation.hpp).
#include "ir/variation.hpp"

#include <algorithm>
#include <sstream>

#include "ir/field_table.hpp"
#include "ir/topology_loader.hpp"

namespace paralab {

namespace {

#define AT(expr) [](auto& row) -> auto& { return row.expr; }

// Entry rows as read (optional members need a sentinel the table can fill).
struct StragglerRow {
  int64_t rank = -1, node = -1;
  double slowdown = 1.0;
  std::string op_kinds;
};

const FieldTable<StragglerRow>& straggler_table() {
  static const FieldTable<StragglerRow> t = [] {
    FieldTable<StragglerRow> x;
    x.integer("rank", AT(rank), 0, int64_t{1} << 40, "", "the slow rank (or give node)")
        .integer("node", AT(node), 0, int64_t{1} << 40, "", "every rank of this node is slow (or give rank)")
        .real("slowdown", AT(slowdown), 0, 1000, "x", "compute ops take this many times as long", true)
        .required()
        .text("op_kinds", AT(op_kinds), "comma-separated op kinds slowed (default: every compute op)");
    return x;
  }();
  return t;
}

const FieldTable<LinkVariation>& link_table() {
  static const FieldTable<LinkVariation> t = [] {
    FieldTable<LinkVariation> x;
    x.integer("node", AT(node), 0, int64_t{1} << 40, "", "the node whose network interfaces degrade")
        .required()
        .integer("nic", AT(nic), 0, 1024, "", "which of its NICs (default: all)")
        .real("bandwidth_fraction", AT(bandwidth_fraction), 0, 1, "", "of their bandwidth left (0: down)")
        .required();
    return x;
  }();
  return t;
}

const FieldTable<NodeGroup>& node_group_table() {
  static const FieldTable<NodeGroup> t = [] {
    FieldTable<NodeGroup> x;
    x.integer("first_node", AT(first_node), 0, int64_t{1} << 40, "", "first node of the group")
        .required()
        .integer("last_node", AT(last_node), 0, int64_t{1} << 40, "", "last node of the group (inclusive)")
        .required()
        .text("topology", AT(topology), "their hardware: a topology name or path")
        .required();
    return x;
  }();
  return t;
}
#undef AT

SourceLoc where_of(const RawTable& entry, const std::string& file) {
  int line = 0;
  for (const auto& [k, v] : entry)
    if (line == 0 || (v.loc.line > 0 && v.loc.line < line)) line = v.loc.line;
  return SourceLoc{file, line, 0};
}

void check_op_kinds(const std::string& list, const SourceLoc& at, const std::string& key) {
  std::stringstream ss(list);
  std::string name;
  while (std::getline(ss, name, ',')) {
    const auto k = op_kind_from_string(name);
    if (!k || is_comm(*k)) {
      std::string allowed;
      for (int i = 0; i < static_cast<int>(OpKind::kCount); ++i)
        if (!is_comm(static_cast<OpKind>(i))) allowed += (allowed.empty() ? "" : ", ") + std::string(to_string(static_cast<OpKind>(i)));
      throw ConfigError(at, key, list, "'" + name + "' is not a compute op kind", allowed);
    }
  }
}

}  // namespace

bool Straggler::slows(OpKind k) const {
  if (is_comm(k)) return false;
  if (op_kinds.empty()) return true;
  std::stringstream ss(op_kinds);
  std::string name;
  while (std::getline(ss, name, ','))
    if (op_kind_from_string(name) == k) return true;
  return false;
}

void read_variation_arrays(VariationConfig& v, const std::map<std::string, RawArray>& arrays,
                           const std::filesystem::path& dir, const std::string& file) {
  for (const auto& [name, entries] : arrays) {
    for (const RawTable& e : entries) {
      const SourceLoc at = where_of(e, file);
      if (name == "variation.straggler") {
        StragglerRow r;
        straggler_table().read(r, e, name + ".", at);
        if ((r.rank >= 0) == (r.node >= 0))
          throw ConfigError(at, name + ".rank", "", "give exactly one of rank and node", "rank = R or node = N");
        if (!r.op_kinds.empty()) check_op_kinds(r.op_kinds, e.at("op_kinds").loc, name + ".op_kinds");
        Straggler s;
        if (r.rank >= 0) s.rank = r.rank;
        else s.node = r.node;
        s.slowdown = r.slowdown;
        s.op_kinds = r.op_kinds;
        v.stragglers.push_back(s);
      } else if (name == "variation.link") {
        LinkVariation l;
        link_table().read(l, e, name + ".", at);
        v.links.push_back(l);
      } else if (name == "variation.node_group") {
        NodeGroup g;
        node_group_table().read(g, e, name + ".", at);
        const SourceLoc& tl = e.at("topology").loc;
        g.resolved = load_topology(resolve_topology(g.topology, dir, tl, name + ".topology"));
        v.node_groups.push_back(std::move(g));
      } else {
        throw ConfigError(SourceLoc{file, 0, 0}, name, "", "arrays of tables are not part of a scenario",
                          "[[variation.straggler]], [[variation.link]], [[variation.node_group]]");
      }
    }
  }
}

void validate_variation(const VariationConfig& v, int64_t world, int64_t nodes, int64_t devices_per_node,
                        const std::string& file) {
  const SourceLoc at{file, 0, 0};
  for (const Straggler& s : v.stragglers) {
    if (s.rank && *s.rank >= world)
      throw ConfigError(at, "variation.straggler.rank", std::to_string(*s.rank), "no such rank",
                        "0 .. " + std::to_string(world - 1));
    if (s.node && *s.node >= nodes)
      throw ConfigError(at, "variation.straggler.node", std::to_string(*s.node), "no such node",
                        "0 .. " + std::to_string(nodes - 1));
  }
  for (const LinkVariation& l : v.links)
    if (l.node >= nodes)
      throw ConfigError(at, "variation.link.node", std::to_string(l.node), "no such node",
                        "0 .. " + std::to_string(nodes - 1));
  if (v.seq_length_distribution == SeqLengthDistribution::exponential && v.document_mean_tokens < 1)
    throw ConfigError(at, "variation.document_mean_tokens", std::to_string(v.document_mean_tokens),
                      "exponential document lengths need their mean", "a positive number of tokens");
  if (v.seq_length_distribution == SeqLengthDistribution::uniform &&
      (v.document_max_tokens < 1 || v.document_min_tokens > v.document_max_tokens))
    throw ConfigError(at, "variation.document_max_tokens", std::to_string(v.document_max_tokens),
                      "uniform document lengths need document_min_tokens <= document_max_tokens",
                      "document_max_tokens >= document_min_tokens (" + std::to_string(v.document_min_tokens) + ")");
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const NodeGroup& g : v.node_groups) {
    if (g.first_node > g.last_node || g.last_node >= nodes)
      throw ConfigError(at, "variation.node_group.last_node", std::to_string(g.last_node),
                        "not a range of this cluster's nodes from first_node " + std::to_string(g.first_node),
                        std::to_string(g.first_node) + " .. " + std::to_string(nodes - 1));
    if (g.resolved.device.kind != DeviceKind::gpu)
      throw ConfigError(at, "variation.node_group.topology", g.topology, "its devices are not GPUs",
                        "a GPU topology (mixed CPU and GPU ranks are not a training cluster)");
    if (g.resolved.node.devices_per_node < devices_per_node)
      throw ConfigError(at, "variation.node_group.topology", g.topology,
                        "its nodes hold " + std::to_string(g.resolved.node.devices_per_node) +
                            " devices, the cluster places " + std::to_string(devices_per_node) + " per node",
                        "a topology with at least cluster.devices_per_node devices per node");
    spans.emplace_back(g.first_node, g.last_node);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].first <= spans[i - 1].second)
      throw ConfigError(at, "variation.node_group.first_node", std::to_string(spans[i].first),
                        "node groups overlap", "disjoint ranges of nodes");
}

}  // namespace paralab
