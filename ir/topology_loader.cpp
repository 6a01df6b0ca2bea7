// paralab — topology schema: every key, its unit, its range; cross-checks between keys.
#include "ir/topology_loader.hpp"

#include <algorithm>
#include <cstdlib>

#include "ir/topology_format.hpp"

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

// Keys of the calibration schema before version 2: what a file that has one should do.
constexpr const char* kSchema1Keys[] = {
    "device.dispatch_us", "device.stream_handoff_us", "device.compute_handoff_us", "device.handoff_on_core_us",
    "device.compute_tail", "collectives.sync_skew_us", "collectives.sync_drift", "collectives.spread_drift",
    "collectives.p2p_ack_us", "collectives.poll_spin_us", "collectives.poll_yield_us", "collectives.wake_us",
    "collectives.contended_lat_us", "collectives.call_tail_us"};

[[noreturn]] void refuse_schema1(const SourceLoc& at, const std::string& key, const std::string& text) {
  throw ConfigError(at, key, text, "a calibration written before schema " + std::to_string(kCalibrationSchema) +
                                       " (its host-noise and executor parameters are gone)",
                    "convert it: paralab calibrate --upgrade OLD.toml NEW.toml");
}

// Where an array entry starts: its first key's line.
SourceLoc entry_loc(const RawTable& e, const std::string& file) {
  int line = 0;
  for (const auto& [k, v] : e)
    if (line == 0 || (v.loc.line > 0 && v.loc.line < line)) line = v.loc.line;
  return SourceLoc{file, line, 0};
}

template <class T>
std::vector<T> read_entries(const RawArray& entries, const FieldTable<T>& fields, const std::string& name,
                            const std::string& file) {
  std::vector<T> out;
  for (const RawTable& e : entries) {
    T x{};
    fields.read(x, e, name + ".", entry_loc(e, file));
    out.push_back(x);
  }
  return out;
}

void check_execution(const ExecutionPoint& p, const SourceLoc& at) {
  const std::string m = std::to_string(p.step_median_s);
  if (!(p.step_min_s <= p.step_median_s && p.step_median_s <= p.step_max_s))
    throw ConfigError(at, "calibration.execution.step_median_s", m, "outside [step_min_s, step_max_s]",
                      "step_min_s <= step_median_s <= step_max_s");
}

void read_calibration(Topology& t, const RawFile& raw, bool has_version) {
  Calibration& c = t.calibration;
  const bool has_data = !raw.arrays.empty() || !c.source.empty();
  if (has_data && !has_version) refuse_schema1(SourceLoc{raw.file, 0, 0}, "calibration.schema_version", "(none)");
  if (has_version && c.schema_version != kCalibrationSchema) {
    const RawValue& v = raw.values.at("calibration.schema_version");
    if (c.schema_version < kCalibrationSchema) refuse_schema1(v.loc, "calibration.schema_version", v.text);
    throw ConfigError(v.loc, "calibration.schema_version", v.text, "written by a newer paralab",
                      std::to_string(kCalibrationSchema));
  }
  for (const auto& [name, entries] : raw.arrays) {
    if (name == "calibration.gemm") c.gemm = read_entries(entries, gemm_point_fields(), name, raw.file);
    else if (name == "calibration.kernel") c.kernels = read_entries(entries, kernel_point_fields(), name, raw.file);
    else if (name == "calibration.execution") {
      c.executions = read_entries(entries, execution_point_fields(), name, raw.file);
      for (size_t i = 0; i < c.executions.size(); ++i) {
        ExecutionPoint& p = c.executions[i];
        if (p.step_min_s == 0) p.step_min_s = p.step_median_s;
        if (p.step_max_s == 0) p.step_max_s = p.step_median_s;
        check_execution(p, entries[i].at("step_median_s").loc);
      }
    } else if (name == "calibration.correction") {
      std::vector<CorrectionRow> rows = read_entries(entries, correction_fields(), name, raw.file);
      try {
        c.corrections = CorrectionTable(std::move(rows));
      } catch (const std::invalid_argument& e) {
        throw ConfigError(entry_loc(entries.front(), raw.file), name, "", e.what(),
                          "rows naming a prefix of: family, op, collective, span, phase, [min_bytes, max_bytes) "
                          "(docs/calibration.md, \"Corrections\"), each class once");
      }
    } else if (name == "calibration.dispatch" || name == "calibration.call") {
      refuse_schema1(entries.empty() ? SourceLoc{raw.file, 0, 0} : entry_loc(entries.front(), raw.file), "[[" + name + "]]", "");
    } else {
      throw ConfigError(SourceLoc{raw.file, 0, 0}, name, "", "unknown array of tables",
                        "[[calibration.correction]], [[calibration.gemm]], [[calibration.kernel]], [[calibration.execution]]");
    }
  }
}

}  // namespace

Topology load_topology(const std::filesystem::path& file,
                       const std::vector<std::pair<std::string, RawValue>>& overrides) {
  RawFile raw = read_toml_file(file);
  for (const auto& [key, v] : overrides) raw.values[key.substr(std::string("topology.").size())] = v;

  Topology t;
  t.file = file;
  const auto& hw = topology_fields();
  for (const auto& [key, v] : raw.values) {
    if (key.rfind("calibration.", 0) == 0) {
      calibration_fields().apply(t.calibration, key, v);
      continue;
    }
    for (const char* old : kSchema1Keys)
      if (key == old) refuse_schema1(v.loc, key, v.text);
    hw.apply(t, key, v);
  }
  for (const auto& f : hw.fields())
    if (f.required && !raw.values.count(f.key))
      throw ConfigError(SourceLoc{raw.file, 0, 0}, f.key, "", "required key is missing", hw.allowed_near(f.key));
  read_calibration(t, raw, raw.values.count("calibration.schema_version") > 0);

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
  if (t.node.nvlink_domain_gpus > 0 && (t.node.nvlink_domain_gpus < t.node.devices_per_node ||
                                         t.node.nvlink_domain_gpus % t.node.devices_per_node != 0))
    throw ConfigError(loc("node.nvlink_domain_gpus"), "node.nvlink_domain_gpus", text("node.nvlink_domain_gpus"),
                      "an NVLink domain holds whole nodes",
                      "0 or a multiple of devices_per_node (" + std::to_string(t.node.devices_per_node) + ")");
  if (t.node.nvlink_domain_gpus > t.node.devices_per_node && t.node.intra != IntraFabric::nvswitch)
    throw ConfigError(loc("node.nvlink_domain_gpus"), "node.nvlink_domain_gpus", text("node.nvlink_domain_gpus"),
                      "a domain across nodes is an NVLink switch fabric", "node.intra = \"nvswitch\"");
  if (t.name.empty()) t.name = file.stem().string();
  return t;
}

}  // namespace paralab
