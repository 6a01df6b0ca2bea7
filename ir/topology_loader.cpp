// paralab — topology schema: every key, its unit, its range; cross-checks between keys.
#include "ir/topology_loader.hpp"

#include <algorithm>
#include <cstdlib>

#include "ir/schema.hpp"

#ifndef PARALAB_DEFAULT_DATA_DIR
#define PARALAB_DEFAULT_DATA_DIR "."
#endif

namespace paralab {

std::filesystem::path data_dir() {
  if (const char* env = std::getenv("PARALAB_DATA_DIR"); env && *env) return env;
  return PARALAB_DEFAULT_DATA_DIR;
}

std::vector<std::string> shipped_topologies() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(data_dir() / "topologies", ec))
    if (e.path().extension() == ".toml") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::filesystem::path resolve_topology(const std::string& name, const std::filesystem::path& relative_to,
                                       const SourceLoc& where, const std::string& key) {
  std::string shipped;
  for (const auto& n : shipped_topologies()) shipped += (shipped.empty() ? "" : " | ") + n;
  if (name.empty())
    throw ConfigError(where, key, "\"\"", "no topology given", shipped + ", or a path to a .toml file");
  const bool is_path = name.find('/') != std::string::npos || name.ends_with(".toml");
  std::filesystem::path p = is_path ? std::filesystem::path(name) : data_dir() / "topologies" / (name + ".toml");
  if (is_path && p.is_relative()) p = relative_to / p;
  // The error_code overload: a name the file system refuses (too long, a loop of links, no
  // permission) is the user's input error too, not an exception of another type.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec))
    throw ConfigError(where, key, "\"" + name + "\"",
                      (is_path ? "topology file not found: " + p.string() : std::string("unknown topology")) +
                          (ec ? " (" + ec.message() + ")" : ""),
                      shipped + ", or a path to a .toml file");
  return p;
}

namespace {

// Accessors so the schema can reach nested members by lambda.
#define AT(expr) [](Topology & t) -> auto& { return t.expr; }

const Schema<Topology>& topology_schema() {
  static const Schema<Topology> s = [] {
    Schema<Topology> x;
    x.text("name", AT(name)).text("description", AT(description));
    x.choice<DeviceKind>("device.kind", AT(device.kind))
        .text("device.name", AT(device.name))
        .integer("device.sm_count", AT(device.sm_count), 1, 100000)
        .real("device.peak_fp32_tflops", AT(device.peak_tflops[math_index(MathMode::f32)]), 0, 1e6, true)
        .real("device.peak_tf32_tflops", AT(device.peak_tflops[math_index(MathMode::tf32)]), 0, 1e6)
        .real("device.peak_bf16_tflops", AT(device.peak_tflops[math_index(MathMode::bf16)]), 0, 1e6)
        .real("device.peak_fp16_tflops", AT(device.peak_tflops[math_index(MathMode::f16)]), 0, 1e6)
        .real("device.peak_fp8_tflops", AT(device.peak_tflops[math_index(MathMode::fp8)]), 0, 1e6)
        .real("device.memory_gib", AT(device.memory_gib), 0, 1e6, true)
        .real("device.mem_bw_gbps", AT(device.mem_bw_gbps), 0, 1e6, true)
        .real("device.l2_mib", AT(device.l2_mib), 0, 1e5)
        .real("device.launch_overhead_us", AT(device.launch_overhead_us), 0, 1e5)
        .real("device.dispatch_us", AT(device.dispatch_us), 0, 1e5)
        .real("device.stream_handoff_us", AT(device.stream_handoff_us), 0, 1e5)
        .real("device.compute_handoff_us", AT(device.compute_handoff_us), 0, 1e5)
        .real("device.handoff_on_core_us", AT(device.handoff_on_core_us), 0, 1e5)
        .real("device.compute_tail", AT(device.compute_tail), 0, 1)
        .real("device.gemm_max_efficiency", AT(device.gemm_max_efficiency), 0, 1, true)
        .integer("device.gemm_tile_m", AT(device.gemm_tile_m), 1, 4096)
        .integer("device.gemm_tile_n", AT(device.gemm_tile_n), 1, 4096)
        .real("device.mem_efficiency", AT(device.mem_efficiency), 0, 1, true)
        .real("device.flash_fwd_efficiency", AT(device.flash_fwd_efficiency), 0, 1, true)
        .real("device.flash_bwd_efficiency", AT(device.flash_bwd_efficiency), 0, 1, true);
    x.integer("node.devices_per_node", AT(node.devices_per_node), 1, 1024)
        .choice<IntraFabric>("node.intra", AT(node.intra))
        .real("node.intra_bw_gbps", AT(node.intra_link.bw_gbps), 0, 1e6, true)
        .real("node.intra_lat_us", AT(node.intra_link.lat_us), 0, 1e6)
        .real("node.intra_efficiency", AT(node.intra_link.efficiency), 0, 1, true)
        .real("node.pcie_bw_gbps", AT(node.pcie.bw_gbps), 0, 1e6)
        .real("node.pcie_lat_us", AT(node.pcie.lat_us), 0, 1e6)
        .real("node.pcie_efficiency", AT(node.pcie.efficiency), 0, 1, true)
        .integer("node.nics_per_node", AT(node.nics_per_node), 0, 1024)
        .integer("node.cores", AT(node.cores), 0, 1000000)
        .real("node.nic_bw_gbps", AT(node.nic.bw_gbps), 0, 1e6)
        .real("node.nic_lat_us", AT(node.nic.lat_us), 0, 1e6)
        .real("node.nic_efficiency", AT(node.nic.efficiency), 0, 1, true);
    x.choice<NetworkKind>("network.kind", AT(network.kind))
        .integer("network.levels", AT(network.levels), 1, 3)
        .integer("network.radix", AT(network.radix), 2, 4096)
        .real("network.oversubscription", AT(network.oversubscription), 1, 64)
        .real("network.link_bw_gbps", AT(network.switch_link.bw_gbps), 0, 1e6, true)
        .real("network.switch_lat_us", AT(network.switch_link.lat_us), 0, 1e6)
        .real("network.link_efficiency", AT(network.switch_link.efficiency), 0, 1, true);
    x.real("collectives.launch_lat_us", AT(collectives.launch_lat_us), 0, 1e6)
        .real("collectives.p2p_launch_lat_us", AT(collectives.p2p_launch_lat_us), 0, 1e6)
        .real("collectives.step_lat_us", AT(collectives.step_lat_us), 0, 1e6)
        .real("collectives.tree_max_bytes", AT(collectives.tree_max_bytes), 0, 1e15)
        .integer("collectives.intra_sms", AT(collectives.intra_sms), 0, 100000)
        .integer("collectives.inter_sms", AT(collectives.inter_sms), 0, 100000)
        .integer("collectives.p2p_sms", AT(collectives.p2p_sms), 0, 100000)
        .real("collectives.sync_skew_us", AT(collectives.sync_skew_us), 0, 1e6)
        .real("collectives.sync_drift", AT(collectives.sync_drift), 0, 10)
        .real("collectives.spread_drift", AT(collectives.spread_drift), 0, 1000)
        .real("collectives.p2p_ack_us", AT(collectives.p2p_ack_us), 0, 1e6)
        .real("collectives.poll_spin_us", AT(collectives.poll_spin_us), 0, 1e6)
        .real("collectives.poll_yield_us", AT(collectives.poll_yield_us), 0, 1e6)
        .real("collectives.wake_us", AT(collectives.wake_us), 0, 1e6)
        .real("collectives.contended_lat_us", AT(collectives.contended_lat_us), 0, 1e6)
        .real("collectives.call_tail_us", AT(collectives.call_tail_us), 0, 1e6)
        .real("collectives.reduce_gbps", AT(collectives.reduce_gbps), 0, 1e6);
    x.text("calibration.source", AT(calibration.source));
    return x;
  }();
  return s;
}
#undef AT

// Required keys: a topology that leaves them out cannot be simulated.
constexpr const char* kRequired[] = {"name", "device.kind", "device.peak_fp32_tflops",
                                     "device.memory_gib", "device.mem_bw_gbps",
                                     "node.devices_per_node", "node.intra", "node.intra_bw_gbps"};

GemmPoint read_gemm_point(const RawTable& e, const std::string& file) {
  GemmPoint p;
  const std::string prefix = "calibration.gemm.";
  bool have_time = false;
  for (const auto& [k, v] : e) {
    const std::string key = prefix + k;
    if (k == "m") p.m = read_int(v, key, 1, int64_t{1} << 40);
    else if (k == "n") p.n = read_int(v, key, 1, int64_t{1} << 40);
    else if (k == "k") p.k = read_int(v, key, 1, int64_t{1} << 40);
    else if (k == "batch") p.batch = read_int(v, key, 1, int64_t{1} << 40);
    else if (k == "math") p.math = read_enum<MathMode>(v, key);
    else if (k == "time_us") { p.time_us = read_double(v, key, 0, 1e12, true); have_time = true; }
    else throw ConfigError(v.loc, key, v.text, "unknown key", "m, n, k, batch, math, time_us");
  }
  if (p.m == 0 || p.n == 0 || p.k == 0 || !have_time)
    throw ConfigError(SourceLoc{file, e.empty() ? 0 : e.begin()->second.loc.line, 0}, "calibration.gemm",
                      "", "an entry lacks m, n, k or time_us", "m, n, k, batch, math, time_us");
  return p;
}

KernelPoint read_kernel_point(const RawTable& e, const std::string& file) {
  KernelPoint p;
  bool have_kind = false, have_bytes = false, have_time = false;
  for (const auto& [k, v] : e) {
    const std::string key = "calibration.kernel." + k;
    if (k == "kind") { p.kind = read_enum<OpKind>(v, key); have_kind = true; }
    else if (k == "bytes") { p.bytes = read_int(v, key, 1, int64_t{1} << 50); have_bytes = true; }
    else if (k == "time_us") { p.time_us = read_double(v, key, 0, 1e12, true); have_time = true; }
    else throw ConfigError(v.loc, key, v.text, "unknown key", "kind, bytes, time_us");
  }
  if (!have_kind || !have_bytes || !have_time)
    throw ConfigError(SourceLoc{file, e.empty() ? 0 : e.begin()->second.loc.line, 0}, "calibration.kernel",
                      "", "an entry lacks kind, bytes or time_us", "kind, bytes, time_us");
  return p;
}

ExecutionPoint read_execution_point(const RawTable& e, const std::string& file) {
  ExecutionPoint p;
  constexpr const char* kAllowed = "scenario, digest, executions, launches, step_median_s, step_fast_s, step_min_s, step_max_s";
  bool have_median = false;
  for (const auto& [k, v] : e) {
    const std::string key = "calibration.execution." + k;
    if (k == "scenario") p.scenario = read_string(v, key);
    else if (k == "digest") p.digest = read_string(v, key);
    else if (k == "executions") p.executions = read_int(v, key, 1, int64_t{1} << 40);
    else if (k == "launches") p.launches = read_int(v, key, 1, int64_t{1} << 40);
    else if (k == "step_median_s") { p.step_median_s = read_double(v, key, 0, 1e9, true); have_median = true; }
    else if (k == "step_fast_s") p.step_fast_s = read_double(v, key, 0, 1e9, true);
    else if (k == "step_min_s") p.step_min_s = read_double(v, key, 0, 1e9, true);
    else if (k == "step_max_s") p.step_max_s = read_double(v, key, 0, 1e9, true);
    else throw ConfigError(v.loc, key, v.text, "unknown key", kAllowed);
  }
  const SourceLoc at{file, e.empty() ? 0 : e.begin()->second.loc.line, 0};
  if (p.scenario.empty() || p.digest.empty() || p.executions == 0 || !have_median)
    throw ConfigError(at, "calibration.execution", "", "an entry lacks scenario, digest, executions or step_median_s", kAllowed);
  if (p.launches > p.executions)
    throw ConfigError(at, "calibration.execution.launches", std::to_string(p.launches), "more launches than executions",
                      "1 to executions (" + std::to_string(p.executions) + ")");
  if (p.step_min_s == 0) p.step_min_s = p.step_median_s;
  if (p.step_max_s == 0) p.step_max_s = p.step_median_s;
  if (!(p.step_min_s <= p.step_median_s && p.step_median_s <= p.step_max_s))
    throw ConfigError(at, "calibration.execution", std::to_string(p.step_median_s),
                      "step_median_s outside [step_min_s, step_max_s]", "step_min_s <= step_median_s <= step_max_s");
  if (p.step_fast_s == 0) p.step_fast_s = p.step_median_s;  // written before the thirty-first session
  if (!(p.step_min_s <= p.step_fast_s && p.step_fast_s <= p.step_median_s))
    throw ConfigError(at, "calibration.execution.step_fast_s", std::to_string(p.step_fast_s),
                      "the fastest half's median outside [step_min_s, step_median_s]", "step_min_s <= step_fast_s <= step_median_s");
  return p;
}

DispatchPoint read_dispatch_point(const RawTable& e, const std::string& file) {
  DispatchPoint p;
  bool have_busy = false, have_gap = false;
  for (const auto& [k, v] : e) {
    const std::string key = "calibration.dispatch." + k;
    if (k == "busy_ranks") { p.busy_ranks = read_int(v, key, 1, 1000000); have_busy = true; }
    else if (k == "dispatch_us") { p.dispatch_us = read_double(v, key, 0, 1e5); have_gap = true; }
    else throw ConfigError(v.loc, key, v.text, "unknown key", "busy_ranks, dispatch_us");
  }
  if (!have_busy || !have_gap)
    throw ConfigError(SourceLoc{file, e.empty() ? 0 : e.begin()->second.loc.line, 0}, "calibration.dispatch", "",
                      "an entry lacks busy_ranks or dispatch_us", "busy_ranks, dispatch_us");
  return p;
}

CallPoint read_call_point(const RawTable& e, const std::string& file) {
  CallPoint p;
  constexpr const char* kAllowed = "collective, group, phase, launch_lat_us, beside_lat_us, executed_us";
  bool have_kind = false, have_group = false, have_phase = false, have_lat = false;
  for (const auto& [k, v] : e) {
    const std::string key = "calibration.call." + k;
    if (k == "collective") { p.collective = read_enum<CollKind>(v, key); have_kind = true; }
    else if (k == "group") { p.group = read_enum<GroupKind>(v, key); have_group = true; }
    else if (k == "phase") { p.phase = read_enum<Phase>(v, key); have_phase = true; }
    else if (k == "launch_lat_us") { p.launch_lat_us = read_double(v, key, 0, 1e6); have_lat = true; }
    else if (k == "beside_lat_us") p.beside_lat_us = read_double(v, key, 0, 1e6);
    else if (k == "executed_us") p.executed_us = read_double(v, key, 0, 1e7);
    else throw ConfigError(v.loc, key, v.text, "unknown key", kAllowed);
  }
  if (!have_kind || !have_group || !have_phase || !have_lat)
    throw ConfigError(SourceLoc{file, e.empty() ? 0 : e.begin()->second.loc.line, 0}, "calibration.call", "",
                      "an entry lacks collective, group, phase or launch_lat_us", kAllowed);
  // The cost beside compute is the class's cost under a condition that only adds time.
  if (p.beside_lat_us > 0 && p.beside_lat_us < p.launch_lat_us) {
    const RawValue& v = e.at("beside_lat_us");
    throw ConfigError(v.loc, "calibration.call.beside_lat_us", v.text, "below the entry's launch_lat_us",
                      "0 (none) or at least launch_lat_us = " + std::to_string(p.launch_lat_us));
  }
  return p;
}

}  // namespace

Topology load_topology(const std::filesystem::path& file,
                       const std::vector<std::pair<std::string, RawValue>>& overrides) {
  RawFile raw = read_toml_file(file);
  for (const auto& [key, v] : overrides) raw.values[key.substr(std::string("topology.").size())] = v;

  Topology t;
  t.file = file;
  // Defaults that depend on nothing: efficiencies 1, network none.
  const auto& schema = topology_schema();
  for (const auto& [key, v] : raw.values) schema.apply(t, key, v);
  for (const char* req : kRequired)
    if (!raw.values.count(req))
      throw ConfigError(SourceLoc{raw.file, 0, 0}, req, "", "required key is missing",
                        schema.allowed_near(req));

  for (const auto& [name, entries] : raw.arrays) {
    if (name == "calibration.gemm") {
      for (const auto& e : entries) t.calibration.gemm.push_back(read_gemm_point(e, raw.file));
    } else if (name == "calibration.kernel") {
      for (const auto& e : entries) t.calibration.kernels.push_back(read_kernel_point(e, raw.file));
    } else if (name == "calibration.execution") {
      for (const auto& e : entries) t.calibration.executions.push_back(read_execution_point(e, raw.file));
    } else if (name == "calibration.dispatch") {
      for (const auto& e : entries) {
        const DispatchPoint p = read_dispatch_point(e, raw.file);
        for (const DispatchPoint& q : t.calibration.dispatch)
          if (q.busy_ranks == p.busy_ranks)
            throw ConfigError(e.at("busy_ranks").loc, "calibration.dispatch.busy_ranks", std::to_string(p.busy_ranks),
                              "two [[calibration.dispatch]] entries for the same number of busy ranks", "each busy_ranks once");
        t.calibration.dispatch.push_back(p);
      }
      std::sort(t.calibration.dispatch.begin(), t.calibration.dispatch.end(),
                [](const DispatchPoint& a, const DispatchPoint& b) { return a.busy_ranks < b.busy_ranks; });
    } else if (name == "calibration.call") {
      for (const auto& e : entries) {
        const CallPoint p = read_call_point(e, raw.file);
        for (const CallPoint& q : t.calibration.calls)
          if (q.collective == p.collective && q.group == p.group && q.phase == p.phase)
            throw ConfigError(e.at("collective").loc, "calibration.call", std::string(enum_to_string(p.collective)) + " " +
                              std::string(enum_to_string(p.group)) + " " + std::string(enum_to_string(p.phase)),
                              "two [[calibration.call]] entries for the same collective, group and phase",
                              "each (collective, group, phase) once");
        t.calibration.calls.push_back(p);
      }
    } else {
      throw ConfigError(SourceLoc{raw.file, 0, 0}, name, "", "unknown array of tables",
                        "[[calibration.gemm]], [[calibration.kernel]], [[calibration.execution]], [[calibration.dispatch]], "
                        "[[calibration.call]]");
    }
  }

  // Cross-key checks.
  auto loc = [&](const std::string& key) {
    auto it = raw.values.find(key);
    return it != raw.values.end() ? it->second.loc : SourceLoc{raw.file, 0, 0};
  };
  auto text = [&](const std::string& key) {
    auto it = raw.values.find(key);
    return it != raw.values.end() ? it->second.text : std::string();
  };
  if (t.network.kind != NetworkKind::none) {
    if (t.node.nics_per_node < 1 || t.node.nic.bw_gbps <= 0)
      throw ConfigError(loc("node.nics_per_node"), "node.nics_per_node", text("node.nics_per_node"),
                        "a multi-node network needs NICs with bandwidth",
                        "nics_per_node >= 1 and nic_bw_gbps > 0");
    if (t.network.switch_link.bw_gbps <= 0) t.network.switch_link.bw_gbps = t.node.nic.bw_gbps;
    if (t.node.pcie.bw_gbps <= 0)
      throw ConfigError(loc("node.pcie_bw_gbps"), "node.pcie_bw_gbps", text("node.pcie_bw_gbps"),
                        "devices reach their NICs over PCIe; its bandwidth must be given", "> 0");
  }
  if (t.node.nics_per_node > 0 && t.node.devices_per_node % t.node.nics_per_node != 0 &&
      t.node.nics_per_node % t.node.devices_per_node != 0)
    throw ConfigError(loc("node.nics_per_node"), "node.nics_per_node", text("node.nics_per_node"),
                      "NICs must be shared evenly by the node's devices",
                      "a divisor or multiple of devices_per_node (" +
                          std::to_string(t.node.devices_per_node) + ")");
  // Files written before the hand-off was split by direction (twenty-eighth session) had one
  // hand-off for both.
  if (!raw.values.count("device.compute_handoff_us")) t.device.compute_handoff_us = t.device.stream_handoff_us;
  if (t.name.empty()) t.name = file.stem().string();
  return t;
}

}  // namespace paralab
