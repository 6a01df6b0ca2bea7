// paralab — a hardware description: the device (GPU or CPU host), the node and the network,
// and nothing else: what a calibration measured beyond it is in `calibration` (ir/calibration.hpp).
// Loaded from topologies/*.toml (data only, every value citing its source) by
// ir/topology_loader.hpp. Units are in the names: _gbps = gigabytes per second (1e9 B/s),
// _us = microseconds, _gib = 2^30 bytes, _tflops = 1e12 FLOP/s.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ir/calibration.hpp"
#include "ir/dtype.hpp"
#include "ir/op_kind.hpp"
#include "ir/step_graph.hpp"

namespace paralab {

enum class DeviceKind : uint8_t { gpu, cpu };
enum class IntraFabric : uint8_t { nvswitch, pcie, shm };
enum class NetworkKind : uint8_t { none, fat_tree, rail_optimized };

constexpr int kMathModes = 7;  // indexes of MathMode
constexpr int math_index(MathMode m) { return static_cast<int>(m); }

// One accelerator (or one CPU rank's share of a host).
struct DeviceSpec {
  DeviceKind kind = DeviceKind::gpu;
  std::string name;
  int64_t sm_count = 1;                    // streaming multiprocessors (GPU) or cores (CPU)
  std::array<double, kMathModes> peak_tflops{};  // dense peak per MathMode; 0 = unsupported
  double memory_gib = 0;                   // HBM (GPU) or memory available to one rank (CPU)
  double mem_bw_gbps = 0;                  // peak memory bandwidth
  double l2_mib = 0;
  double launch_overhead_us = 0;           // per kernel launch (host side of a kernel of no work)
  // Compute model (sim/): fraction of peak a large, well-shaped GEMM reaches; the output tile
  // of the library's main kernel (for tile and wave quantization over sm_count); fraction of
  // peak bandwidth a streaming kernel reaches; fused attention efficiencies vs the GEMM peak.
  double gemm_max_efficiency = 0.8;
  int64_t gemm_tile_m = 128;
  int64_t gemm_tile_n = 128;
  double mem_efficiency = 0.85;
  double flash_fwd_efficiency = 0.6;
  double flash_bwd_efficiency = 0.5;

  [[nodiscard]] double peak(MathMode m) const { return peak_tflops[math_index(m)]; }
};

// A point-to-point link class: bandwidth per direction, latency per traversal, and the
// fraction of bandwidth collectives reach over it (protocol overhead, measured by nccl-tests,
// or by `paralab calibrate`'s collective sweep).
struct LinkSpec {
  double bw_gbps = 0;
  double lat_us = 0;
  double efficiency = 1.0;

  [[nodiscard]] double effective_bw_gbps() const { return bw_gbps * efficiency; }
};

struct NodeSpec {
  int64_t devices_per_node = 1;
  IntraFabric intra = IntraFabric::nvswitch;
  LinkSpec intra_link;   // device <-> NVSwitch (per device), or shared-memory transport (CPU)
  LinkSpec pcie;         // device <-> PCIe switch <-> NIC
  int64_t nics_per_node = 0;
  LinkSpec nic;          // NIC <-> leaf switch
  // Devices that share one NVLink switch fabric at intra_link's bandwidth: a multiple of
  // devices_per_node when the fabric spans several hosts (GB200 NVL72: 72 GPUs over 18 trays of
  // 4); 0 = the node's own devices. The simulator's network node is this domain
  // (docs/network.md, "NVLink domains").
  int64_t nvlink_domain_gpus = 0;
  [[nodiscard]] int64_t nvlink_domain() const { return nvlink_domain_gpus > 0 ? nvlink_domain_gpus : devices_per_node; }
  // CPU hosts: the cores all ranks of a node share. When its ranks need more cores than this
  // (ranks x DeviceSpec::sm_count), the node's cores are a pool its ranks' compute takes turns
  // on (sim/engine/core_share.hpp); 0 = each rank owns sm_count cores.
  int64_t cores = 0;
};

// A GPU node's host side, for optimizer and parameter offload (docs/offload.md): the CPUs'
// memory and cores every GPU of the node shares, and each GPU's PCIe (or chip-to-chip) link to
// them. Described when memory, bandwidth, cores and link are all > 0; else offload is refused.
struct HostSpec {
  double memory_gib = 0;       // host DRAM per node
  double mem_bw_gbps = 0;      // peak DRAM bandwidth per node, all sockets
  double mem_efficiency = 0.7; // fraction of it a multithreaded streaming kernel reaches (STREAM)
  int64_t cores = 0;           // physical cores per node
  double core_gflops = 0;      // fp32 FLOP/s per core (vector units), in GFLOP/s
  LinkSpec link;               // one GPU <-> host memory, per direction (pinned copies)
  [[nodiscard]] bool described() const { return memory_gib > 0 && mem_bw_gbps > 0 && cores > 0 && link.bw_gbps > 0; }
};

struct NetworkSpec {
  NetworkKind kind = NetworkKind::none;
  int64_t levels = 2;            // switch tiers of the fat tree (1..3)
  int64_t radix = 40;            // ports per switch
  double oversubscription = 1.0; // leaf down:up bandwidth ratio (1 = full bisection)
  LinkSpec switch_link;          // switch <-> switch; lat_us is the per-hop switch latency
};

// NCCL-like collective costs that are not link properties.
struct CollectiveSpec {
  double launch_lat_us = 5.0;    // fixed cost per collective call (kernel launch, setup)
  // Fixed cost per point-to-point transfer call (a pipeline send/receive pair, a ring shift), in
  // us; unset: launch_lat_us.
  std::optional<double> p2p_launch_lat_us;
  [[nodiscard]] double p2p_launch_us() const { return p2p_launch_lat_us.value_or(launch_lat_us); }
  double step_lat_us = 1.0;      // per algorithm step, added to the links' latencies
  double tree_max_bytes = 0;     // automatic choice: tree below this size when nodes > 1
  // SMs a communication kernel occupies while it runs: NCCL runs one thread block per channel
  // and a channel's block does not share its SM with compute kernels, so compute on the same
  // GPU proceeds on the other SMs (sim/: docs/simulator.md, "Compute beside communication").
  // 0 = communication takes no SMs (CPU hosts, or not modeled).
  int64_t intra_sms = 0;         // a collective whose members are all on one node
  int64_t inter_sms = 0;         // a collective spanning nodes
  int64_t p2p_sms = 0;           // a send or a receive to one peer
  // Throughput of the reduction arithmetic of all-reduce and reduce-scatter, in GB/s of
  // received input combined per rank: on a CPU host the communication thread that copies also
  // adds, one after the other (Open MPI's MPI_Op on the host: measured 2-rank reduce-scatters of
  // 1 MiB take 3x an all-gather of the same wire bytes), so a call pays
  // (n-1)/n x bytes / reduce_gbps on top of its transfers. 0 = free: NCCL reduces inside its
  // copy kernels at link speed (GPU topologies).
  double reduce_gbps = 0;
};

struct Topology {
  std::string name;
  std::string description;
  std::filesystem::path file;
  DeviceSpec device;
  NodeSpec node;
  HostSpec host;
  NetworkSpec network;
  CollectiveSpec collectives;
  Calibration calibration;  // empty unless `paralab calibrate` wrote the file
};

std::string_view to_string(DeviceKind v);
std::string_view to_string(IntraFabric v);
std::string_view to_string(NetworkKind v);

}  // namespace paralab
