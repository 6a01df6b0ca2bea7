// paralab — converting a schema-1 calibration to schema 2 (upgrade.hpp).
#include "analysis/calibration/upgrade.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "ir/enum_names.hpp"
#include "ir/raw_config.hpp"
#include "ir/schema.hpp"
#include "ir/topology_format.hpp"
#include "ir/topology_loader.hpp"

namespace paralab::calib {

namespace {

// Schema 1's keys that are gone, and why.
const std::map<std::string, std::string>& dropped_keys() {
  static const std::map<std::string, std::string> m = {
      {"device.compute_tail", "a shared host's preemptions"},
      {"device.handoff_on_core_us", "the executor's worker on a shared core"},
      {"collectives.sync_skew_us", "a shared host's arrival skew"},
      {"collectives.sync_drift", "a shared host's arrival drift"},
      {"collectives.spread_drift", "a shared host's arrival drift"},
      {"collectives.p2p_ack_us", "the executor's MPI poller"},
      {"collectives.poll_spin_us", "the executor's MPI poller"},
      {"collectives.poll_yield_us", "the executor's MPI poller"},
      {"collectives.wake_us", "the executor's MPI poller"},
      {"collectives.contended_lat_us", "the executor's MPI poller"},
      {"collectives.call_tail_us", "a shared host's preemptions"}};
  return m;
}

CorrectionRow gap_row(CostKind cost, std::optional<OpFamily> family, double us) {
  CorrectionRow r;
  r.cls.cost = cost;
  r.cls.family = family;
  r.c.fixed_us = us;
  return r;
}

double number(const RawValue& v, const std::string& key) { return read_double(v, key, -1e12, 1e12); }

template <class T>
std::vector<T> read_kept(const RawArray& entries, const FieldTable<T>& fields, const std::string& name, const std::string& file,
                         const std::vector<std::string>& drop, std::vector<std::string>& dropped) {
  std::vector<T> out;
  for (const RawTable& e : entries) {
    RawTable kept;
    for (const auto& [k, v] : e) {
      if (std::find(drop.begin(), drop.end(), k) != drop.end()) {
        dropped.push_back("[[" + name + "]] " + k + " = " + v.text);
        continue;
      }
      kept[k] = v;
    }
    T x{};
    fields.read(x, kept, name + ".", SourceLoc{file, e.empty() ? 0 : e.begin()->second.loc.line, 0});
    out.push_back(x);
  }
  return out;
}

}  // namespace

Upgrade upgrade_calibration(const std::filesystem::path& old_file) {
  const RawFile raw = read_toml_file(old_file);
  if (raw.values.count("calibration.schema_version")) return Upgrade{load_topology(old_file), {}, {}};
  Upgrade u;
  Topology& t = u.topology;
  t.file = old_file;
  std::vector<CorrectionRow> rows;
  std::optional<double> stream_handoff, compute_handoff;
  for (const auto& [key, v] : raw.values) {
    if (auto it = dropped_keys().find(key); it != dropped_keys().end()) {
      u.dropped.push_back(key + " = " + v.text + " (" + it->second + ")");
    } else if (key == "device.dispatch_us") {
      const double us = number(v, key);
      if (us > 0) rows.push_back(gap_row(CostKind::dispatch, std::nullopt, us));
      u.converted.push_back(key + " = " + v.text + " -> dispatch (every op)");
    } else if (key == "device.stream_handoff_us") {
      stream_handoff = number(v, key);
    } else if (key == "device.compute_handoff_us") {
      compute_handoff = number(v, key);
    } else if (key.rfind("calibration.", 0) == 0) {
      if (key != "calibration.source") u.dropped.push_back(key + " = " + v.text);
      else t.calibration.source = v.s;
    } else {
      topology_fields().apply(t, key, v);
    }
  }
  if (stream_handoff) {
    if (*stream_handoff > 0) rows.push_back(gap_row(CostKind::handoff, OpFamily::comm, *stream_handoff));
    u.converted.push_back("device.stream_handoff_us = " + toml_number(*stream_handoff) + " -> handoff (comm)");
  }
  if (stream_handoff || compute_handoff) {  // schema 1: a file without the compute hand-off had one for both
    const double us = compute_handoff.value_or(stream_handoff.value_or(0.0));
    if (us > 0) rows.push_back(gap_row(CostKind::handoff, OpFamily::compute, us));
    u.converted.push_back("device.compute_handoff_us = " + toml_number(us) + " -> handoff (compute)");
  }
  for (const auto& [name, entries] : raw.arrays) {
    const std::string& f = raw.file;
    if (name == "calibration.gemm") t.calibration.gemm = read_kept(entries, gemm_point_fields(), name, f, {}, u.dropped);
    else if (name == "calibration.kernel") t.calibration.kernels = read_kept(entries, kernel_point_fields(), name, f, {}, u.dropped);
    else if (name == "calibration.execution")
      t.calibration.executions = read_kept(entries, execution_point_fields(), name, f, {"launches", "step_fast_s"}, u.dropped);
    else if (name == "calibration.dispatch")
      u.dropped.push_back("[[calibration.dispatch]] x " + std::to_string(entries.size()) + " (the gap by a shared host's busy ranks)");
    else if (name == "calibration.call") {
      for (const RawTable& e : entries) {
        CorrectionRow r;
        r.cls.family = OpFamily::comm;
        r.cls.kind = OpKind::collective;
        r.cls.span = Span::intra_node;  // schema 1 calibrated one host
        double launch = 0;
        for (const auto& [k, v] : e) {
          if (k == "collective") r.cls.collective = read_enum<CollKind>(v, name + "." + k);
          else if (k == "phase") r.cls.phase = read_enum<Phase>(v, name + "." + k);
          else if (k == "launch_lat_us") launch = number(v, name + "." + k);
          else if (k != "group") u.dropped.push_back("[[calibration.call]] " + k + " = " + v.text);
        }
        r.c.fixed_us = launch - t.collectives.launch_lat_us;
        for (const CorrectionRow& q : rows)
          if (q.cls == r.cls && q.c.fixed_us != r.c.fixed_us)
            throw std::invalid_argument(old_file.string() + ": two [[calibration.call]] entries become " + r.cls.label() +
                                        " with different costs (" + toml_number(q.c.fixed_us) + " and " + toml_number(r.c.fixed_us) +
                                        " us beyond launch_lat_us); schema 2 keys calls by span, not group kind");
        if (std::none_of(rows.begin(), rows.end(), [&](const CorrectionRow& q) { return q.cls == r.cls; })) rows.push_back(r);
        u.converted.push_back("[[calibration.call]] " + r.cls.label() + ": launch_lat_us " + toml_number(launch));
      }
    } else {
      throw ConfigError(SourceLoc{raw.file, 0, 0}, name, "", "unknown array of tables in a schema-1 calibration",
                        "[[calibration.gemm]], [[calibration.kernel]], [[calibration.execution]], [[calibration.dispatch]], "
                        "[[calibration.call]]");
    }
  }
  t.calibration.schema_version = kCalibrationSchema;
  t.calibration.corrections = CorrectionTable(std::move(rows));
  if (t.name.empty()) t.name = old_file.stem().string();
  return u;
}

std::string upgrade_toml(const Upgrade& u, const std::filesystem::path& old_file) {
  std::string header = u.topology.name + ": converted from " + old_file.filename().string() + " by `paralab calibrate --upgrade` (schema 1 -> " +
                       std::to_string(kCalibrationSchema) + ", docs/calibration.md \"Upgrading\").";
  for (const std::string& c : u.converted) header += "\nconverted: " + c;
  for (const std::string& d : u.dropped) header += "\ndropped: " + d;
  return topology_toml(u.topology, header);
}

}  // namespace paralab::calib
