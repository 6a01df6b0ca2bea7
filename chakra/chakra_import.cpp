// paralab — Chakra execution traces -> sim::replay::TraceSet (chakra_import.hpp).
#include "chakra/chakra_import.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "chakra/attributes.hpp"
#include "chakra/chakra_export.hpp"
#include "chakra/delimited_stream.hpp"
#include "chakra/node_table.hpp"
#include "chakra/process_groups.hpp"

namespace paralab::chakra {

namespace {

namespace et = paralab::chakra_et;
using sim::replay::NodeKind;
using sim::replay::TraceError;
using sim::replay::TraceNode;

// rank -> file, for the one prefix the folder's *.<rank>.et files share.
std::map<int64_t, std::filesystem::path> trace_files(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw TraceError(dir.string(), std::nullopt, "is not a folder");
  static const std::regex name(R"((.+)\.(\d+)\.et)");
  std::map<std::string, std::map<int64_t, std::filesystem::path>> by_prefix;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::smatch m;
    const std::string f = e.path().filename().string();
    if (e.is_regular_file() && std::regex_match(f, m, name)) by_prefix[m[1]][std::stoll(m[2])] = e.path();
  }
  if (by_prefix.empty()) throw TraceError(dir.string(), std::nullopt, "holds no Chakra traces (<prefix>.<rank>.et)");
  if (by_prefix.size() > 1)
    throw TraceError(dir.string(), std::nullopt, "holds traces of several prefixes ('" + by_prefix.begin()->first +
                                                     "', '" + std::next(by_prefix.begin())->first + "'): one per folder");
  auto& files = by_prefix.begin()->second;
  int64_t expect = 0;
  for (const auto& [rank, path] : files) {
    if (rank != expect)
      throw TraceError(dir.string(), std::nullopt, "has no trace of rank " + std::to_string(expect) + " (" +
                                                       by_prefix.begin()->first + "." + std::to_string(expect) + ".et)");
    ++expect;
  }
  return files;
}

std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw TraceError(p.string(), std::nullopt, "cannot be read");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

NodeKind kind_of(const std::string& file, const et::Node& n) {
  switch (static_cast<EtNodeType>(n.type())) {
    case EtNodeType::comp: return NodeKind::compute;
    case EtNodeType::coll: return NodeKind::collective;
    case EtNodeType::send: return NodeKind::send;
    case EtNodeType::recv: return NodeKind::recv;
    case EtNodeType::metadata:
    case EtNodeType::mem_load:
    case EtNodeType::mem_store: return NodeKind::none;
    case EtNodeType::invalid: break;
  }
  throw TraceError(file, n.id(), "node type " + std::to_string(static_cast<int>(n.type())) +
                                     " is not one Chakra defines (METADATA_NODE 1 .. COMM_COLL_NODE 7)");
}

int64_t required(const std::string& file, const et::Node& n, const char* attr) {
  if (auto v = int_attr(n.attr(), attr)) return *v;
  throw TraceError(file, n.id(), std::string(to_string(static_cast<EtNodeType>(n.type()))) + " has no integer '" +
                                     attr + "' attribute");
}

void read_comm(const std::string& file, int64_t rank, const et::Node& n, TraceNode& t) {
  if (t.kind == NodeKind::collective) {
    const int64_t type = required(file, n, "comm_type");
    const auto net = net_coll_of(type);
    if (!net)
      throw TraceError(file, n.id(), "collective type " + std::string(coll_type_name(type)) + " (" + std::to_string(type) +
                                         ") has no model in sim/net (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER[_BLOCK], "
                                         "ALL_TO_ALL, BROADCAST, BARRIER)");
    t.coll = *net;
    t.comm_bytes = type == static_cast<int64_t>(EtCollType::barrier) ? 0 : required(file, n, "comm_size");
    const std::string pg = string_attr(n.attr(), "pg_name").value_or("");
    t.group = pg == "0" ? "" : pg;
    return;
  }
  const bool send = t.kind == NodeKind::send;
  t.comm_bytes = send ? required(file, n, "comm_size") : int_attr(n.attr(), "comm_size").value_or(0);
  t.peer = required(file, n, send ? "comm_dst" : "comm_src");
  const auto self = int_attr(n.attr(), send ? "comm_src" : "comm_dst");
  if (self && *self != rank)
    throw TraceError(file, n.id(), std::string(send ? "a send from rank " : "a receive into rank ") +
                                       std::to_string(*self) + " in the trace of rank " + std::to_string(rank));
  t.tag = static_cast<uint32_t>(int_attr(n.attr(), "comm_tag").value_or(0));
}

TraceNode convert(const std::string& file, int64_t rank, const et::Node& n) {
  TraceNode t;
  t.id = n.id();
  t.name = n.name();
  t.kind = kind_of(file, n);
  t.deps.assign(n.data_deps().begin(), n.data_deps().end());
  t.deps.insert(t.deps.end(), n.ctrl_deps().begin(), n.ctrl_deps().end());
  std::sort(t.deps.begin(), t.deps.end());
  t.deps.erase(std::unique(t.deps.begin(), t.deps.end()), t.deps.end());
  t.cpu = int_attr(n.attr(), "is_cpu_op").value_or(0) != 0;
  if (auto exact = double_attr(n.attr(), kExactDurationAttr)) t.duration_us = *exact;
  else if (n.duration_micros() > 0) t.duration_us = static_cast<double>(n.duration_micros());
  t.flops = static_cast<double>(int_attr(n.attr(), "num_ops").value_or(0));
  t.bytes = static_cast<double>(int_attr(n.attr(), "tensor_size").value_or(0));
  if (t.kind == NodeKind::collective || t.kind == NodeKind::send || t.kind == NodeKind::recv) read_comm(file, rank, n, t);
  return t;
}

void read_metadata(const et::GlobalMetadata& m, sim::replay::TraceSet& set) {
  if (auto t = string_attr(m.attr(), "paralab_topology")) set.topology = *t;
  if (auto d = int_attr(m.attr(), "devices_per_node")) set.devices_per_node = *d;
}

}  // namespace

sim::replay::TraceSet read_chakra(const std::filesystem::path& dir) {
  sim::replay::TraceSet set;
  set.source = dir.string();
  for (const auto& [rank, path] : trace_files(dir)) {
    sim::replay::RankTrace t;
    t.rank = rank;
    t.file = path.string();
    DelimitedReader in(t.file, read_bytes(path));
    et::GlobalMetadata meta;
    if (!in.next(meta, "GlobalMetadata")) throw TraceError(t.file, std::nullopt, "is empty (no GlobalMetadata)");
    if (rank == 0) read_metadata(meta, set);
    et::Node n;
    while (in.next(n, "Node")) {
      t.nodes.push_back(convert(t.file, rank, n));
      n.Clear();
    }
    set.ranks.push_back(std::move(t));
  }
  const std::filesystem::path groups = dir / kCommGroupFile;
  if (std::filesystem::exists(groups)) set.groups = read_comm_groups(groups);
  sim::replay::check_trace_set(set);
  return set;
}

}  // namespace paralab::chakra
