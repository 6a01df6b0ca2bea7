// paralab — trace checks (trace.hpp): what a malformed trace gets wrong, named by file and node.
#include "sim/replay/trace.hpp"

#include <algorithm>
#include <unordered_map>

namespace paralab::sim::replay {

std::string_view to_string(NodeKind k) {
  switch (k) {
    case NodeKind::compute: return "compute";
    case NodeKind::collective: return "collective";
    case NodeKind::send: return "send";
    case NodeKind::recv: return "recv";
    case NodeKind::none: return "none";
  }
  return "?";
}

TraceError::TraceError(const std::string& file, std::optional<uint64_t> node, const std::string& problem)
    : ConfigError(SourceLoc{file, 0, 0}, node ? "node " + std::to_string(*node) : std::string(), "", problem, ""),
      node_(node) {}

namespace {

// Node ids -> index in the file; duplicate ids and dependencies outside the file are errors.
std::unordered_map<uint64_t, uint32_t> index_nodes(const RankTrace& t) {
  std::unordered_map<uint64_t, uint32_t> at;
  at.reserve(t.nodes.size());
  for (uint32_t i = 0; i < t.nodes.size(); ++i)
    if (!at.emplace(t.nodes[i].id, i).second)
      throw TraceError(t.file, t.nodes[i].id, "the id is used by two nodes");
  for (const TraceNode& n : t.nodes)
    for (uint64_t d : n.deps)
      if (!at.count(d))
        throw TraceError(t.file, n.id, "depends on node " + std::to_string(d) + ", which is not in the file");
  return at;
}

// Kahn's algorithm; what is left over lies on or behind a cycle. Names a node on the cycle:
// walking back along unfinished dependencies from any leftover node must revisit one.
void check_acyclic(const RankTrace& t, const std::unordered_map<uint64_t, uint32_t>& at) {
  const size_t n = t.nodes.size();
  std::vector<uint32_t> waits(n, 0);
  std::vector<std::vector<uint32_t>> children(n);
  for (uint32_t i = 0; i < n; ++i)
    for (uint64_t d : t.nodes[i].deps) {
      ++waits[i];
      children[at.at(d)].push_back(i);
    }
  std::vector<uint32_t> ready;
  for (uint32_t i = 0; i < n; ++i)
    if (waits[i] == 0) ready.push_back(i);
  size_t done = 0;
  while (!ready.empty()) {
    const uint32_t i = ready.back();
    ready.pop_back();
    ++done;
    for (uint32_t c : children[i])
      if (--waits[c] == 0) ready.push_back(c);
  }
  if (done == n) return;
  uint32_t cur = 0;
  while (waits[cur] == 0) ++cur;
  std::vector<char> seen(n, 0);
  while (!seen[cur]) {
    seen[cur] = 1;
    for (uint64_t d : t.nodes[cur].deps)
      if (waits[at.at(d)] > 0) {
        cur = at.at(d);
        break;
      }
  }
  throw TraceError(t.file, t.nodes[cur].id,
                   "lies on a dependency cycle (" + std::to_string(n - done) + " nodes can never start)");
}

void check_comm(const TraceSet& set, const RankTrace& t) {
  const auto world = static_cast<int64_t>(set.ranks.size());
  for (const TraceNode& n : t.nodes) {
    if (n.kind == NodeKind::collective && !n.group.empty()) {
      auto g = set.groups.find(n.group);
      if (g == set.groups.end())
        throw TraceError(t.file, n.id, "process group '" + n.group + "' is not defined (comm_group.json)");
      if (std::find(g->second.begin(), g->second.end(), t.rank) == g->second.end())
        throw TraceError(t.file, n.id, "rank " + std::to_string(t.rank) + " is not in its process group '" +
                                           n.group + "'");
    }
    if ((n.kind == NodeKind::send || n.kind == NodeKind::recv) && (n.peer < 0 || n.peer >= world || n.peer == t.rank))
      throw TraceError(t.file, n.id, std::string(to_string(n.kind)) + " names peer rank " + std::to_string(n.peer) +
                                         " (the traces hold ranks 0.." + std::to_string(world - 1) + ")");
    if (n.comm_bytes < 0) throw TraceError(t.file, n.id, "negative communication size");
  }
}

}  // namespace

void check_trace_set(const TraceSet& set) {
  if (set.ranks.empty()) throw TraceError(set.source, std::nullopt, "no traces found");
  const auto world = static_cast<int64_t>(set.ranks.size());
  for (const auto& [name, members] : set.groups)
    for (int64_t r : members)
      if (r < 0 || r >= world)
        throw TraceError(set.source, std::nullopt, "process group '" + name + "' names rank " + std::to_string(r) +
                                                       " (the traces hold ranks 0.." + std::to_string(world - 1) + ")");
  for (size_t r = 0; r < set.ranks.size(); ++r) {
    const RankTrace& t = set.ranks[r];
    if (t.rank != static_cast<int64_t>(r))
      throw TraceError(t.file, std::nullopt, "expected the trace of rank " + std::to_string(r));
    check_acyclic(t, index_nodes(t));
    check_comm(set, t);
  }
}

}  // namespace paralab::sim::replay
