// paralab — a hardware description: the device (GPU or CPU host), the node and the network.
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

#include "ir/dtype.hpp"
#include "ir/op_kind.hpp"
#include "ir/step_graph.hpp"

namespace paralab {

enum class DeviceKind : uint8_t { gpu, cpu };
enum class IntraFabric : uint8_t { nvswitch, pcie, shm };
enum class NetworkKind : uint8_t { none, fat_tree, rail_optimized };

constexpr int kMathModes = 5;  // indexes of MathMode
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
  double launch_overhead_us = 0;           // per kernel launch / per op dispatch
  // The executor's host-side hand-offs between ops (sim/engine: docs/simulator.md, "Dispatch
  // and hand-offs"): the gap from an op's end to the start of the next op on the same stream
  // when nothing else holds it (the worker thread's bookkeeping), and the gap from the end of
  // a dependency on another stream to the start of the op waiting for it (waking the waiting
  // stream's worker): a communication worker woken by compute (stream_handoff_us), and the
  // compute worker woken by a finished call (compute_handoff_us; absent from the file: the
  // same as stream_handoff_us). The two differ on a CPU host: the compute worker resumes as
  // the call's thread goes back to sleep (2.8-3.2 us on the 2-core build machine), a woken
  // communication worker waits for the compute worker to wake it and move on (7.5-8.2 us).
  // Measured by `paralab calibrate` in a real execution; 0 on GPUs, where the host enqueues
  // ahead of the device and the device's own gaps are in the op times.
  double dispatch_us = 0;
  double stream_handoff_us = 0;
  double compute_handoff_us = 0;
  // Of a communication worker's hand-off, the part it runs on its rank's core, the compute
  // thread preempted (the wake-up's own cost: the median hand-off, at most the mean); the rest
  // of the mean it waits for the core while compute runs on. Used where each rank owns its
  // cores (sim/engine/core_share.hpp, rank_cores); 0: the worker takes the core at its post.
  double handoff_on_core_us = 0;
  // A shared host's preemptions (sim/engine: docs/simulator.md, "Dispatch and hand-offs"): the
  // time a step's compute ops lose to them, as a fraction of their time (in the median
  // execution: the step's compute over its ops' key medians summed, minus 1). The simulator
  // gives each op its median time, what the per-op comparison scores, and stalls the stream
  // this fraction of the op's time after it, so that a step of many ops adds up to the median
  // run's compute. Measured by `paralab calibrate`; 0 on GPUs.
  double compute_tail = 0;
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
// fraction of bandwidth collectives reach over it (protocol overhead, measured by nccl-tests;
// on a calibrated CPU host, how much slower the executed step's calls moved their bytes than
// the sweep's warm buffers: docs/calibration.md, "The in-situ split").
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
  // CPU hosts: the cores all ranks of a node share. When its ranks need more cores than this
  // (ranks x DeviceSpec::sm_count), mpirun does not bind them and every thread of every rank
  // competes for the node's cores (sim/engine/core_share.hpp); 0 = each rank owns sm_count
  // cores (bound), the only regime before it was measured.
  int64_t cores = 0;
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
  // us; unset: launch_lat_us. On a CPU host whose ranks share cores the two differ: the 2-rank
  // TP all-reduces of cpu-tp2-pp2-gpipe took a median 103 us beyond the alpha-beta fit (a ring
  // needs both members' threads to run, in turns), its pipeline receives 1.8 us
  // (bench/results/validate_cpu.md, "seventeenth session"). Measured by `paralab calibrate`.
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
  // Mean time from a member's arrival at a collective to the last member's (us): the members
  // reach a synchronizing call at different times on a shared host (preemption, cores shared
  // with other ranks' threads), and the call starts when the last arrives. The simulator's
  // ranks of a stage are identical, so it adds this wait before every collective and every
  // ring shift (context parallelism's sendrecv) within a stage over more than one rank.
  // Measured by `paralab calibrate` in a real execution; 0 = not modeled.
  double sync_skew_us = 0;
  // The part of that wait that grows with the time since the stage's compute last waited for a
  // call (us of wait per us elapsed): the ranks then start together, and their compute drifts
  // apart at a rate the calibration measures (quickstart: 0.04-0.08; a collective after a layer
  // norm waits ~0.1 ms, one after a GEMM chain several). When the members' spread
  // (spread_drift x that time) exceeds poll_spin_us the earliest member sleeps, and the call
  // ends wake_us later. Measured by `paralab calibrate` in a real execution, and written where
  // that spread tells those calls clearly better than a constant (docs/calibration.md); 0 = not
  // modeled.
  double sync_drift = 0;
  // The members' arrival spread per us of that time (us/us) at which the simulator has the
  // earliest member asleep (spread > poll_spin_us): fitted apart from sync_drift, whose ratio
  // of summed waits is set by the few long ones, as the threshold that classifies the executed
  // calls best (docs/calibration.md, "Why the skew drifts"); 0 = twice sync_drift.
  double spread_drift = 0;
  // Time from a transfer's arrival at its receiver to its sender seeing it complete (us). A
  // rendezvous send (Open MPI above its eager limit, 4 KiB in shared memory) completes only when
  // the sender's progress engine sees the receiver's acknowledgement; on a CPU host the
  // sender's poller has usually gone to sleep or its thread waits for a core, while the
  // receiver, polling since it posted, sees the data at once (4 ranks on 2 cores: receives
  // ended a median 0.06-0.17 ms after their last side arrived, sends 0.6-0.9 ms after their
  // receives). The simulator ends a send this long after its receive; the send stream's next
  // transfer waits for it. Measured by `paralab calibrate` in a real execution; 0 = both ends
  // together (NCCL's send and receive kernels finish with the last chunk).
  double p2p_ack_us = 0;
  // How long a communication thread busy-polls for a call that has not completed before it
  // sleeps (us): the executor's MPI wait spins for 0.5 ms (exec/mpi/mpi_transport.cpp). On a
  // CPU host the simulator counts a posted call's thread as runnable for this long (or until
  // its call starts moving data, when it counts as busy anyway), sharing cores with compute.
  // 0 = waiting threads sleep at once (GPU topologies: the host thread is not modeled).
  double poll_spin_us = 0;
  // Where the node's cores are a pool its ranks take turns on (more ranks than cores: docs/
  // simulator.md, "Shared cores"), how long a polling thread that holds a core keeps it once
  // another thread waits for one (us). The executor's poller hands its core turn over every 32
  // tests whenever a thread of the node waits (exec/mpi/mpi_transport.cpp, wait_all): a few us,
  // so `paralab calibrate` writes 0. Absent from the file: never (the poller keeps its core
  // for its whole window, as the executor did before it handed turns over).
  double poll_yield_us = std::numeric_limits<double>::infinity();
  // Time a call's thread takes to see its call complete once it has stopped spinning (us): the
  // executor's poller then sleeps 20-100 us between tests, and on a host whose ranks share
  // cores a woken thread also waits for one. A call that ends more than poll_spin_us after its
  // rank posted it ends this much later (a send: after its receive's). On cpu-pp4 (4 ranks, 2
  // cores) receives whose data was there when they were posted took a median 20 us, those
  // whose receiver had waited 0.5 ms or more 391 us (bench/results/validate_cpu.md, "sixth
  // session"). Measured by `paralab calibrate` in a real execution; 0 = seen at once.
  double wake_us = 0;
  // Per-call cost added to a collective within a stage that starts while a call of another
  // group kind, or of another stage, on its node was posted less than poll_spin_us before and
  // has not ended (us): on a CPU host that call's poller still spins on the cores this call's
  // members need. On cpu-tp2-dp2-zero3 (4 ranks, 2 cores) the 32 KB TP all-gathers took a
  // median 80 us from their last arrival with a DP call's poller spinning, 44 us without; on
  // cpu-tp2-pp2-gpipe 91 against 58-73 us (bench/results/validate_cpu.md, "thirty-seventh
  // session"). Measured by `paralab calibrate` in a real execution; 0 = not modeled (GPUs).
  double contended_lat_us = 0;
  // A call's mean time beyond what the simulator predicts for it (us), waited after the call
  // ends before anything that depended on it starts, as DeviceSpec::compute_tail is after a
  // compute op. The per-call costs are weighted medians, what the per-op comparison scores
  // (analysis/lad_fit.hpp); on a CPU host the calls' times are skewed to the right (a member
  // descheduled for 300 us), and the step pays their mean: cpu-tp2-dp2-zero3's 32 KB TP
  // all-gathers had per-op medians of median 66.8 us, mean 69.2 us, fitted 55.5 us
  // (bench/results/validate_cpu.md, "thirty-seventh session"). Measured by `paralab calibrate`
  // in a real execution; 0 = none (GPUs).
  double call_tail_us = 0;
  // Throughput of the reduction arithmetic of all-reduce and reduce-scatter, in GB/s of
  // received input combined per rank: on a CPU host the communication thread that copies also
  // adds, one after the other (Open MPI's MPI_Op on the host: measured 2-rank reduce-scatters of
  // 1 MiB take 3x an all-gather of the same wire bytes), so a call pays
  // (n-1)/n x bytes / reduce_gbps on top of its transfers. 0 = free: NCCL reduces inside its
  // copy kernels at link speed (GPU topologies).
  double reduce_gbps = 0;
};

// Measurements written by `paralab calibrate`, overriding the model per op shape.
struct GemmPoint {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  MathMode math = MathMode::f32;
  double time_us = 0;
};
struct KernelPoint {
  OpKind kind = OpKind::cast;
  int64_t bytes = 0;     // bytes the kernel reads and writes
  double time_us = 0;
};
// A scenario the calibration executed in situ, and how long its steps took then: what
// `validate` holds its own executions against, to tell the machine's drift since calibrating
// from the model's error (docs/calibration.md, "Validate"). The simulator does not read it.
struct ExecutionPoint {
  std::string scenario;  // the scenario's name
  std::string digest;    // its scenario_digest (model, training, layout keys)
  int64_t executions = 0;
  int64_t launches = 1;  // of the calibration job the executions spread over
  double step_median_s = 0, step_min_s = 0, step_max_s = 0;
  // The median step of the fastest half of the executions (analysis/run_noise.hpp,
  // fastest_half): what the calibration's in-situ figures were taken from, and what validate
  // holds its own runs' fastest half against. Files without it: step_median_s.
  double step_fast_s = 0;
};
// The executor's dispatch gap (DeviceSpec::dispatch_us) when `busy_ranks` of the node's ranks
// are computing (a compute op running or about to start after its stream predecessor), where
// the node's ranks outnumber its cores: each op's end hands the core turn to a waiting thread,
// and the turn comes back after the others' (docs/simulator.md, "Shared cores"). On cpu-pp4 (4
// ranks, 2 cores) the executed gaps' medians were 48-49, 81-84, 107-112 and 122-132 us with 1, 2,
// 3 and 4 ranks computing (bench/results/validate_cpu.md, "thirty-fifth session"). Measured by
// `paralab calibrate` in a real execution; the simulator takes the point of the nearest
// busy_ranks (the lower on a tie), and dispatch_us where there is none.
struct DispatchPoint {
  int64_t busy_ranks = 0;
  double dispatch_us = 0;
};
// The fixed cost per call (us, in place of CollectiveSpec::launch_lat_us) of the collectives of
// one kind, group kind and phase: what those calls cost in the executed step beyond the
// alpha-beta fit, per call. On a CPU host a call's cost depends on what came before it: on
// quickstart the backward reduce-scatters follow a GEMM of milliseconds (their members arrive
// far apart, one poller sleeps, the buffers are cold) and the forward all-gathers a layer norm;
// one cost for all predicted its 1 MB calls 39-45 % short in a pass where no call was predicted
// asleep ("thirty-ninth session"), and with a cost per class its op MAPE was 1.5-2.4 points
// lower against the same references (bench/results/validate_cpu.md, "fortieth session").
// Measured by `paralab calibrate` in a real execution, for the classes with enough calls; a
// contended call keeps CollectiveSpec::contended_lat_us's cost (docs/calibration.md, "Per-class
// call costs").
struct CallPoint {
  CollKind collective = CollKind::all_reduce;
  GroupKind group = GroupKind::tp;
  Phase phase = Phase::forward;
  double launch_lat_us = 0;
  // What the class's calls took in the executions it was fitted on (us; 0: not recorded): the
  // median over its calls of each call's median over the executions. Not a model input:
  // validate compares its own runs' calls of the class with it (docs/calibration.md).
  double executed_us = 0;
  // The fixed cost of a call of the class that ran while its rank computed (us; 0: none, every
  // call pays launch_lat_us; else at least launch_lat_us). On a host whose ranks share cores
  // the compute thread takes the core the call's thread needs: cpu-tp2-dp2-zero3's 32 KB
  // backward TP all-gathers took a median 112 us from their last arrival beside compute, 46 us
  // without (bench/results/validate_cpu.md, "fifty-second session"; docs/calibration.md,
  // "Beside compute").
  double beside_lat_us = 0;
};
struct Calibration {
  std::string source;    // how and where it was measured
  std::vector<GemmPoint> gemm;
  std::vector<KernelPoint> kernels;
  std::vector<DispatchPoint> dispatch;  // sorted by busy_ranks, each at most once
  std::vector<CallPoint> calls;         // each (collective, group, phase) at most once
  std::vector<ExecutionPoint> executions;

  [[nodiscard]] bool empty() const { return gemm.empty() && kernels.empty(); }
};

struct Topology {
  std::string name;
  std::string description;
  std::filesystem::path file;
  DeviceSpec device;
  NodeSpec node;
  NetworkSpec network;
  CollectiveSpec collectives;
  Calibration calibration;
};

std::string_view to_string(DeviceKind v);
std::string_view to_string(IntraFabric v);
std::string_view to_string(NetworkKind v);

}  // namespace paralab
