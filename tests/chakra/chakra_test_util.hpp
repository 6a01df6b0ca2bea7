// paralab — helpers of the Chakra and trace-replay tests: hand-built trace files and sets, the
// shipped topologies, a scenario's export written to a folder.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "analysis/temp_dir.hpp"
#include "chakra/attributes.hpp"
#include "chakra/chakra_export.hpp"
#include "chakra/delimited_stream.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/topology_loader.hpp"

namespace paralab::chakra::test {

namespace et = paralab::chakra_et;

inline Topology shipped(const std::string& name) { return load_topology(data_dir() / "topologies" / (name + ".toml")); }

inline void write_bytes(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out << bytes;
}

inline void write_export(const ChakraExport& e, const std::filesystem::path& dir) {
  for (const TraceFile& f : e.files) write_bytes(dir / f.name, f.content);
}

inline et::Node node(uint64_t id, et::NodeType type, std::vector<uint64_t> deps = {}) {
  et::Node n;
  n.set_id(id);
  n.set_name("n" + std::to_string(id));
  n.set_type(type);
  for (uint64_t d : deps) n.add_data_deps(d);
  return n;
}

inline et::Node compute(uint64_t id, uint64_t micros, std::vector<uint64_t> deps = {}) {
  et::Node n = node(id, et::COMP_NODE, std::move(deps));
  n.set_duration_micros(micros);
  return n;
}

inline et::Node send(uint64_t id, int32_t dst, int64_t bytes, int32_t tag, std::vector<uint64_t> deps = {}) {
  et::Node n = node(id, et::COMM_SEND_NODE, std::move(deps));
  add_int32(*n.mutable_attr(), "comm_dst", dst);
  add_int64(*n.mutable_attr(), "comm_size", bytes);
  add_int32(*n.mutable_attr(), "comm_tag", tag);
  return n;
}

inline et::Node recv(uint64_t id, int32_t src, int64_t bytes, int32_t tag, std::vector<uint64_t> deps = {}) {
  et::Node n = node(id, et::COMM_RECV_NODE, std::move(deps));
  add_int32(*n.mutable_attr(), "comm_src", src);
  add_int64(*n.mutable_attr(), "comm_size", bytes);
  add_int32(*n.mutable_attr(), "comm_tag", tag);
  return n;
}

inline et::Node collective(uint64_t id, int64_t type, int64_t bytes, const std::string& pg, std::vector<uint64_t> deps = {}) {
  et::Node n = node(id, et::COMM_COLL_NODE, std::move(deps));
  add_int64(*n.mutable_attr(), "comm_type", type);
  add_int64(*n.mutable_attr(), "comm_size", bytes);
  if (!pg.empty()) add_string(*n.mutable_attr(), "pg_name", pg);
  return n;
}

// The bytes of a trace file: a GlobalMetadata, then the nodes.
inline std::string trace_bytes(const std::vector<et::Node>& nodes) {
  std::string out;
  et::GlobalMetadata m;
  m.set_version("0.0.4");
  append_delimited(m, out);
  for (const et::Node& n : nodes) append_delimited(n, out);
  return out;
}

inline void write_trace(const std::filesystem::path& dir, int rank, const std::vector<et::Node>& nodes) {
  write_bytes(dir / ("t." + std::to_string(rank) + ".et"), trace_bytes(nodes));
}

}  // namespace paralab::chakra::test
