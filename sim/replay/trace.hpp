// paralab — a set of per-rank execution traces as plain data: what the trace replay
// (replay.hpp) simulates. Readers of foreign formats (chakra/: Chakra execution traces) convert
// into these structs, so sim/ never sees their file formats or libraries.
//
// Each rank's trace is a graph of nodes: compute (a recorded duration, or FLOPs and bytes the
// topology's device prices), collectives over a named process group, point-to-point sends and
// receives matched by (source, destination, tag), and nodes that take no time (metadata,
// memory). A node starts when every node it depends on (data and control dependencies alike)
// has finished.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/error.hpp"
#include "sim/net/comm.hpp"

namespace paralab::sim::replay {

enum class NodeKind : uint8_t { compute, collective, send, recv, none };
std::string_view to_string(NodeKind k);

struct TraceNode {
  uint64_t id = 0;      // the trace's own id, unique within the rank's file
  std::string name;
  NodeKind kind = NodeKind::none;
  std::vector<uint64_t> deps;  // ids of nodes of the same rank that must finish first
  // compute: the recorded duration if any, else flops / bytes priced on the device.
  std::optional<double> duration_us;
  double flops = 0, bytes = 0;
  bool cpu = false;     // a host-side op (Chakra's is_cpu_op): runs on the rank's CPU queue
  // collective: kind, bytes per rank as NCCL counts them (sim/net/comm.hpp), process group
  // (empty: every rank of the set).
  CollKind coll = CollKind::all_reduce;
  int64_t comm_bytes = 0;
  std::string group;
  // send / recv: the other rank and the tag both sides carry.
  int64_t peer = -1;
  uint32_t tag = 0;
};

struct RankTrace {
  int64_t rank = 0;
  std::string file;  // where it came from, for errors
  std::vector<TraceNode> nodes;  // file order (a collective's occurrence counts in this order)
};

struct TraceSet {
  std::string source;                                   // the directory, for messages
  std::vector<RankTrace> ranks;                         // index == rank
  std::map<std::string, std::vector<int64_t>> groups;   // process group name -> member ranks
  std::string topology;                                 // a topology the traces name, if any
  int64_t devices_per_node = 0;                         // 0: the topology's NVLink domain
};

// A malformed trace: names the file and, where there is one, the node (its trace id).
class TraceError : public ConfigError {
 public:
  TraceError(const std::string& file, std::optional<uint64_t> node, const std::string& problem);
  [[nodiscard]] std::optional<uint64_t> node() const { return node_; }

 private:
  std::optional<uint64_t> node_;
};

// Checks what the replay relies on, throwing TraceError naming the file and the node: ranks
// numbered 0..n-1 in order, node ids unique, dependencies on nodes of the same file, no
// dependency cycle, groups naming existing ranks and containing the ranks that use them,
// peers in range and not the rank itself.
void check_trace_set(const TraceSet& set);

}  // namespace paralab::sim::replay
