// paralab — the topology file's field tables and writer (format in topology_format.hpp).
#include "ir/topology_format.hpp"

#include <limits>

namespace paralab {

namespace {
#define AT(expr) [](auto& t) -> auto& { return t.expr; }
constexpr int64_t kBig = int64_t{1} << 50;
}  // namespace

const FieldTable<Topology>& topology_fields() {
  static const FieldTable<Topology> s = [] {
    FieldTable<Topology> x;
    x.text("name", AT(name), "topology name").required();
    x.text("description", AT(description), "what hardware this is");
    x.choice<DeviceKind>("device.kind", AT(device.kind), "gpu | cpu").required();
    x.text("device.name", AT(device.name), "device model");
    x.integer("device.sm_count", AT(device.sm_count), 1, 100000, "", "streaming multiprocessors (GPU) or cores per rank (CPU)");
    x.real("device.peak_fp32_tflops", AT(device.peak_tflops[math_index(MathMode::f32)]), 0, 1e6, "TFLOP/s", "dense fp32 peak", true)
        .required();
    x.real("device.peak_tf32_tflops", AT(device.peak_tflops[math_index(MathMode::tf32)]), 0, 1e6, "TFLOP/s", "dense tf32 peak");
    x.real("device.peak_bf16_tflops", AT(device.peak_tflops[math_index(MathMode::bf16)]), 0, 1e6, "TFLOP/s", "dense bf16 peak");
    x.real("device.peak_fp16_tflops", AT(device.peak_tflops[math_index(MathMode::f16)]), 0, 1e6, "TFLOP/s", "dense fp16 peak");
    x.real("device.peak_fp8_tflops", AT(device.peak_tflops[math_index(MathMode::fp8)]), 0, 1e6, "TFLOP/s", "dense fp8 peak (0: none)");
    x.real("device.peak_mxfp8_tflops", AT(device.peak_tflops[math_index(MathMode::mxfp8)]), 0, 1e6, "TFLOP/s",
           "dense mxfp8 peak, block-scaled e4m3 (0: none)").omit_default();
    x.real("device.peak_nvfp4_tflops", AT(device.peak_tflops[math_index(MathMode::nvfp4)]), 0, 1e6, "TFLOP/s",
           "dense nvfp4 peak, block-scaled e2m1 (0: none)").omit_default();
    x.real("device.memory_gib", AT(device.memory_gib), 0, 1e6, "GiB", "device memory (HBM, or one CPU rank's share)", true).required();
    x.real("device.mem_bw_gbps", AT(device.mem_bw_gbps), 0, 1e6, "GB/s", "peak memory bandwidth", true).required();
    x.real("device.l2_mib", AT(device.l2_mib), 0, 1e5, "MiB", "last-level cache");
    x.real("device.launch_overhead_us", AT(device.launch_overhead_us), 0, 1e5, "us", "time of a kernel of no work");
    x.real("device.gemm_max_efficiency", AT(device.gemm_max_efficiency), 0, 1, "", "fraction of peak a large GEMM sustains", true);
    x.integer("device.gemm_tile_m", AT(device.gemm_tile_m), 1, 4096, "", "GEMM output tile rows (wave quantization)");
    x.integer("device.gemm_tile_n", AT(device.gemm_tile_n), 1, 4096, "", "GEMM output tile columns");
    x.real("device.mem_efficiency", AT(device.mem_efficiency), 0, 1, "", "fraction of peak bandwidth a streaming kernel reaches", true);
    x.real("device.flash_fwd_efficiency", AT(device.flash_fwd_efficiency), 0, 1, "", "fused attention forward vs the GEMM peak", true);
    x.real("device.flash_bwd_efficiency", AT(device.flash_bwd_efficiency), 0, 1, "", "fused attention backward vs the GEMM peak", true);
    x.integer("node.devices_per_node", AT(node.devices_per_node), 1, 1024, "", "devices (ranks) per node").required();
    x.choice<IntraFabric>("node.intra", AT(node.intra), "nvswitch | pcie | shm").required();
    x.real("node.intra_bw_gbps", AT(node.intra_link.bw_gbps), 0, 1e6, "GB/s", "per device and direction, within a node", true).required();
    x.real("node.intra_lat_us", AT(node.intra_link.lat_us), 0, 1e6, "us", "per traversal within a node");
    x.real("node.intra_efficiency", AT(node.intra_link.efficiency), 0, 1, "", "fraction of intra bandwidth collectives reach", true);
    x.real("node.pcie_bw_gbps", AT(node.pcie.bw_gbps), 0, 1e6, "GB/s", "device to NIC, per direction");
    x.real("node.pcie_lat_us", AT(node.pcie.lat_us), 0, 1e6, "us", "device to NIC");
    x.real("node.pcie_efficiency", AT(node.pcie.efficiency), 0, 1, "", "fraction of PCIe bandwidth reached", true);
    x.integer("node.nics_per_node", AT(node.nics_per_node), 0, 1024, "", "NICs per node");
    x.integer("node.nvlink_domain_gpus", AT(node.nvlink_domain_gpus), 0, 4096, "",
              "devices behind one NVLink switch fabric, a multiple of devices_per_node (0: one node)").omit_default();
    x.integer("node.cores", AT(node.cores), 0, 1000000, "", "CPU cores all ranks of a node share (0: each rank owns sm_count)");
    x.real("node.nic_bw_gbps", AT(node.nic.bw_gbps), 0, 1e6, "GB/s", "per NIC and direction");
    x.real("node.nic_lat_us", AT(node.nic.lat_us), 0, 1e6, "us", "NIC to leaf switch");
    x.real("node.nic_efficiency", AT(node.nic.efficiency), 0, 1, "", "fraction of NIC bandwidth collectives reach", true);
    x.real("host.memory_gib", AT(host.memory_gib), 0, 1e9, "GiB", "host DRAM per node (0: not described)").omit_default();
    x.real("host.mem_bw_gbps", AT(host.mem_bw_gbps), 0, 1e6, "GB/s", "host DRAM bandwidth per node").omit_default();
    x.real("host.mem_efficiency", AT(host.mem_efficiency), 0, 1, "", "fraction of host bandwidth a streaming kernel reaches", true)
        .omit_default();
    x.integer("host.cores", AT(host.cores), 0, 1000000, "", "host cores per node").omit_default();
    x.real("host.core_gflops", AT(host.core_gflops), 0, 1e6, "GFLOP/s", "fp32 per host core").omit_default();
    x.real("host.link_bw_gbps", AT(host.link.bw_gbps), 0, 1e6, "GB/s", "one GPU to host memory, per direction").omit_default();
    x.real("host.link_lat_us", AT(host.link.lat_us), 0, 1e6, "us", "per copy").omit_default();
    x.real("host.link_efficiency", AT(host.link.efficiency), 0, 1, "", "fraction of link bandwidth a pinned copy reaches", true)
        .omit_default();
    x.choice<NetworkKind>("network.kind", AT(network.kind), "none | fat_tree | rail_optimized");
    x.integer("network.levels", AT(network.levels), 1, 3, "", "switch tiers");
    x.integer("network.radix", AT(network.radix), 2, 4096, "", "ports per switch");
    x.real("network.oversubscription", AT(network.oversubscription), 1, 64, "", "leaf down:up bandwidth");
    x.real("network.link_bw_gbps", AT(network.switch_link.bw_gbps), 0, 1e6, "GB/s", "switch to switch, per direction (0: the NICs')");
    x.real("network.switch_lat_us", AT(network.switch_link.lat_us), 0, 1e6, "us", "per switch hop");
    x.real("network.link_efficiency", AT(network.switch_link.efficiency), 0, 1, "", "fraction of switch link bandwidth reached", true);
    x.real("collectives.launch_lat_us", AT(collectives.launch_lat_us), 0, 1e6, "us", "fixed cost per collective call");
    x.optional_real("collectives.p2p_launch_lat_us", AT(collectives.p2p_launch_lat_us), 0, 1e6, "us",
                    "fixed cost per transfer call (unset: launch_lat_us)");
    x.real("collectives.step_lat_us", AT(collectives.step_lat_us), 0, 1e6, "us", "per algorithm step");
    x.real("collectives.tree_max_bytes", AT(collectives.tree_max_bytes), 0, 1e15, "bytes", "tree below this size across nodes");
    x.integer("collectives.intra_sms", AT(collectives.intra_sms), 0, 100000, "", "SMs (cores) a collective within a node holds");
    x.integer("collectives.inter_sms", AT(collectives.inter_sms), 0, 100000, "", "SMs (cores) a collective across nodes holds");
    x.integer("collectives.p2p_sms", AT(collectives.p2p_sms), 0, 100000, "", "SMs (cores) a send or receive holds");
    x.real("collectives.reduce_gbps", AT(collectives.reduce_gbps), 0, 1e6, "GB/s", "reduction arithmetic (0: free, inside the copy)");
    return x;
  }();
  return s;
}

const FieldTable<Calibration>& calibration_fields() {
  static const FieldTable<Calibration> s = [] {
    FieldTable<Calibration> x;
    x.integer("calibration.schema_version", AT(schema_version), 1, 1000, "", "calibration file schema").required();
    x.text("calibration.source", AT(source), "how and where it was measured");
    return x;
  }();
  return s;
}

const FieldTable<GemmPoint>& gemm_point_fields() {
  static const FieldTable<GemmPoint> s = [] {
    FieldTable<GemmPoint> x;
    x.integer("m", AT(m), 1, kBig, "", "rows of C").required();
    x.integer("n", AT(n), 1, kBig, "", "columns of C").required();
    x.integer("k", AT(k), 1, kBig, "", "inner dimension").required();
    x.integer("batch", AT(batch), 1, kBig, "", "batched matrices");
    x.choice<MathMode>("math", AT(math), "math mode");
    x.real("time_us", AT(time_us), 0, 1e12, "us", "measured time", true).required();
    return x;
  }();
  return s;
}

const FieldTable<KernelPoint>& kernel_point_fields() {
  static const FieldTable<KernelPoint> s = [] {
    FieldTable<KernelPoint> x;
    x.choice<OpKind>("kind", AT(kind), "op kind").required();
    x.integer("bytes", AT(bytes), 1, kBig, "bytes", "read and written").required();
    x.real("time_us", AT(time_us), 0, 1e12, "us", "measured time", true).required();
    return x;
  }();
  return s;
}

const FieldTable<CorrectionRow>& correction_fields() {
  static const FieldTable<CorrectionRow> s = [] {
    FieldTable<CorrectionRow> x;
    x.choice<CostKind>("cost", AT(cls.cost), "time | dispatch | handoff").required();
    x.optional_choice<OpFamily>("family", AT(cls.family), "compute | comm (unset: every op)");
    x.optional_choice<OpKind>("op", AT(cls.kind), "op kind (unset: the family's every op)");
    x.optional_choice<CollKind>("collective", AT(cls.collective), "collective kind (op = collective)");
    x.optional_choice<Span>("span", AT(cls.span), "intra_node | inter_node (communication)");
    x.optional_choice<Phase>("phase", AT(cls.phase), "fwd | bwd | recompute | optimizer");
    x.integer("min_bytes", AT(cls.min_bytes), 0, kBig, "bytes", "size bucket: from").omit_default();
    x.integer("max_bytes", AT(cls.max_bytes), 0, kBig, "bytes", "size bucket: below (0: no bucket)").omit_default();
    x.real("fixed_us", AT(c.fixed_us), -1e9, 1e9, "us", "fixed cost per op").required();
    x.real("factor", AT(c.factor), 0, 1e6, "", "multiplies the modeled time");
    x.integer("samples", AT(samples), 0, kBig, "", "measurements fitted").omit_default();
    x.real("mape_pct", AT(mape_pct), 0, 1e9, "%", "the fit's mean absolute error over them").omit_default();
    return x;
  }();
  return s;
}

const FieldTable<ExecutionPoint>& execution_point_fields() {
  static const FieldTable<ExecutionPoint> s = [] {
    FieldTable<ExecutionPoint> x;
    x.text("scenario", AT(scenario), "scenario name").required();
    x.text("digest", AT(digest), "its scenario_digest").required();
    x.integer("executions", AT(executions), 1, kBig, "", "steps executed").required();
    x.real("step_median_s", AT(step_median_s), 0, 1e9, "s", "median step", true).required();
    x.real("step_min_s", AT(step_min_s), 0, 1e9, "s", "fastest step", true);
    x.real("step_max_s", AT(step_max_s), 0, 1e9, "s", "slowest step", true);
    return x;
  }();
  return s;
}

#undef AT

namespace {

template <class T>
void write_array(std::string& out, const std::string& name, const std::vector<T>& entries, const FieldTable<T>& fields,
                 const TopologyNotes& notes) {
  for (size_t i = 0; i < entries.size(); ++i) {
    out += "\n[[" + name + "]]";
    if (auto it = notes.find(name + "#" + std::to_string(i)); it != notes.end()) out += "  # " + it->second;
    out += "\n";
    std::string body = fields.write(entries[i]);
    if (!body.empty() && body.front() == '\n') body.erase(0, 1);
    out += body;
  }
}

}  // namespace

std::string topology_toml(const Topology& t, const std::string& header, const TopologyNotes& notes) {
  std::string out;
  size_t at = 0;
  while (at < header.size()) {
    const size_t nl = header.find('\n', at);
    const std::string line = header.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    out += line.empty() ? "#\n" : "# " + line + "\n";
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  std::string hw = topology_fields().write(t, notes);
  if (!hw.empty() && hw.front() == '\n' && out.empty()) hw.erase(0, 1);
  out += hw;
  const Calibration& c = t.calibration;
  if (c.schema_version == 0) return out;
  out += calibration_fields().write(c, notes);
  write_array(out, "calibration.correction", c.corrections.rows(), correction_fields(), notes);
  write_array(out, "calibration.execution", c.executions, execution_point_fields(), notes);
  write_array(out, "calibration.gemm", c.gemm, gemm_point_fields(), notes);
  write_array(out, "calibration.kernel", c.kernels, kernel_point_fields(), notes);
  return out;
}

}  // namespace paralab
