// paralab — a class of communication at two speeds across launches (see comm_speeds.hpp).
#include "analysis/comm_speeds.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <stdexcept>
#include <utility>

#include "analysis/compare.hpp"
#include "analysis/measure.hpp"
#include "ir/enum_names.hpp"

namespace paralab::calib {

namespace {

// A warning line: the host's part of the explanation is the same for both warnings.
constexpr const char* kHostHint =
    "on a VM, often the hypervisor moving its vCPUs between cores that share a cache and cores that do not: "
    "paralab_host_cross_core measures it";

// A communication op's class ("all_gather tp, fwd", "send pp, bwd"); "" for any other op.
std::string comm_class_of(const OpMeta& m) {
  if (m.kind != "collective" && m.kind != "send" && m.kind != "recv" && m.kind != "sendrecv") return {};
  return op_class(m) + ", " + m.phase;
}

// The median, interpolated between the middle two (calibrate's quantile, analysis/measure.hpp).
double median_of(std::vector<double> v) { return quantile(std::move(v), 0.5); }

}  // namespace

std::vector<CommSpeeds> comm_two_speeds(const RunDurations& durations,
                                        const std::map<std::pair<int64_t, OpId>, std::string>& class_of,
                                        const std::vector<int>& launch_of) {
  std::vector<CommSpeeds> out;
  if (launch_of.empty()) return out;
  const int launches = *std::max_element(launch_of.begin(), launch_of.end()) + 1;
  if (launches < kMinLaunchesForSpeeds) return out;
  // Per class: every duration of its ops, by launch; and its ops per run.
  struct Class {
    std::vector<std::vector<double>> by_launch;
    int64_t ops = 0;
  };
  std::map<std::string, Class> classes;
  for (const auto& [key, d] : durations) {
    const auto c = class_of.find(key);
    if (c == class_of.end()) continue;
    if (d.size() != launch_of.size())
      throw std::invalid_argument("comm_two_speeds: an op has " + std::to_string(d.size()) + " durations for " +
                                  std::to_string(launch_of.size()) + " runs");
    Class& k = classes[c->second];
    k.by_launch.resize(static_cast<size_t>(launches));
    ++k.ops;
    for (size_t run = 0; run < d.size(); ++run) {
      const int l = launch_of[run];
      if (l < 0) throw std::invalid_argument("comm_two_speeds: a run's launch is negative");
      k.by_launch[static_cast<size_t>(l)].push_back(d[run]);
    }
  }
  for (auto& [cls, k] : classes) {
    if (k.ops < kMinOpsPerClass) continue;
    std::vector<double> medians;
    for (std::vector<double>& v : k.by_launch)
      if (!v.empty()) medians.push_back(median_of(std::move(v)));
    const int n = static_cast<int>(medians.size());
    if (n < kMinLaunchesForSpeeds) continue;
    std::sort(medians.begin(), medians.end());
    // The widest gap between consecutive launch medians (as a ratio) splits fast from slow.
    int split = -1;
    double widest = 0;
    for (int i = 0; i + 1 < n; ++i) {
      const double lo = medians[static_cast<size_t>(i)], hi = medians[static_cast<size_t>(i + 1)];
      if (lo <= 0) continue;
      if (hi / lo > widest) widest = hi / lo, split = i;
    }
    if (split < 0 || widest < kMinGapRatio || split + 1 < kMinLaunchesPerSpeed || n - split - 1 < kMinLaunchesPerSpeed)
      continue;
    const std::vector<double> fast(medians.begin(), medians.begin() + split + 1);
    const std::vector<double> slow(medians.begin() + split + 1, medians.end());
    CommSpeeds s;
    s.cls = cls;
    s.ops = k.ops;
    s.fast_launches = static_cast<int>(fast.size());
    s.slow_launches = static_cast<int>(slow.size());
    s.fast_us = median_of(fast);
    s.slow_us = median_of(slow);
    // The groups' medians, not only the gap's two ends, must be that far apart.
    if (s.ratio() >= kTwoSpeedsRatio) out.push_back(s);
  }
  std::sort(out.begin(), out.end(), [](const CommSpeeds& a, const CommSpeeds& b) { return a.ratio() > b.ratio(); });
  return out;
}

std::map<std::pair<int64_t, OpId>, std::string> comm_classes(const LoadedResult& r) {
  std::map<std::pair<int64_t, OpId>, std::string> out;
  if (!r.has_ops) return out;
  for (size_t i = 0; i < r.result.ops.size() && i < r.meta.size(); ++i)
    if (std::string cls = comm_class_of(r.meta[i]); !cls.empty())
      out[{r.result.ops[i].rank, r.result.ops[i].op}] = std::move(cls);
  return out;
}

std::string two_speeds_warning(const CommSpeeds& s) {
  char buf[768];
  std::snprintf(buf, sizeof buf,
                "warning: the %s calls (%lld per run) ran at two speeds: a median %.4g us in %d launches, %.4g us in %d "
                "(%.1fx), nothing between. This host's communication switched speed between launches (%s), and a "
                "reference or a calibration that met another mix of the two differs on these calls by that much; an "
                "error of that size on them is the host's",
                s.cls.c_str(), static_cast<long long>(s.ops), s.fast_us, s.fast_launches, s.slow_us, s.slow_launches,
                s.ratio(), kHostHint);
  return buf;
}

std::vector<CallsSinceCalibration> calls_since_calibration(const LoadedResult& reference,
                                                           const std::vector<CallPoint>& calls) {
  std::vector<CallsSinceCalibration> out;
  if (!reference.has_ops) return out;
  // class -> the reference's op durations (a transfer's class names no collective: never looked up)
  std::map<std::string, std::vector<double>> measured;
  for (size_t i = 0; i < reference.result.ops.size() && i < reference.meta.size(); ++i)
    if (const std::string cls = comm_class_of(reference.meta[i]); !cls.empty())
      measured[cls].push_back(reference.result.ops[i].end_us - reference.result.ops[i].start_us);
  for (const CallPoint& p : calls) {
    if (p.executed_us <= 0) continue;
    const std::string cls = std::string(enum_to_string(p.collective)) + " " + std::string(enum_to_string(p.group)) +
                            ", " + std::string(enum_to_string(p.phase));
    const auto it = measured.find(cls);
    if (it == measured.end() || it->second.empty()) continue;
    CallsSinceCalibration c;
    c.cls = cls;
    c.ops = static_cast<int64_t>(it->second.size());
    c.calibrated_us = p.executed_us;
    c.measured_us = median_of(it->second);
    out.push_back(c);
  }
  return out;
}

bool CallsSinceCalibration::drifted() const {
  return ratio() >= kCallDriftWarnRatio || ratio() <= 1.0 / kCallDriftWarnRatio;
}

std::string call_drift_warning(const CallsSinceCalibration& c) {
  const std::string head = "warning: the " + c.cls + " calls took a median ";
  char buf[768];
  std::snprintf(buf, sizeof buf,
                "%.4g us in these runs and %.4g us in the calibration's executions (%.2fx): the host's communication "
                "changed speed since it was calibrated (%s); the prediction of these %lld calls rests on those "
                "executions, and an error on them of up to that ratio is the host's, not the model's (run again, or "
                "--recalibrate)",
                c.measured_us, c.calibrated_us, c.ratio(), kHostHint, static_cast<long long>(c.ops));
  return head + buf;
}

std::string comm_speed_table(const std::vector<CallsSinceCalibration>& calls, const std::vector<CommSpeeds>& speeds) {
  constexpr size_t kWidth = 100;  // wrap items past this column
  // "label       what: item; item; ..." with the items wrapped under the label's 12 columns.
  auto section = [](const std::string& label, const std::string& what, const std::vector<std::string>& items) {
    const std::string indent(12, ' ');
    std::string out = label + std::string(12 - label.size(), ' ') + what + "\n", line = indent;
    for (const std::string& item : items) {
      if (line.size() == indent.size()) {
        line += item;
      } else if (line.size() + 2 + item.size() > kWidth) {
        out += line + ";\n";
        line = indent + item;
      } else {
        line += "; " + item;
      }
    }
    return out + line + "\n\n";
  };
  std::string out;
  char buf[256];
  if (!calls.empty()) {
    std::vector<std::string> items;
    for (const CallsSinceCalibration& c : calls) {
      std::snprintf(buf, sizeof buf, "%s %.4g -> %.4g us (%.2fx)", c.cls.c_str(), c.calibrated_us, c.measured_us, c.ratio());
      items.push_back(buf);
    }
    out += section("calls", "each collective class's median call in the calibration's executions -> these runs:", items);
  }
  if (!speeds.empty()) {
    std::vector<std::string> items;
    for (const CommSpeeds& c : speeds) {
      std::snprintf(buf, sizeof buf, "%s %.4g us in %d launches, %.4g us in %d (%.1fx)", c.cls.c_str(), c.fast_us,
                    c.fast_launches, c.slow_us, c.slow_launches, c.ratio());
      items.push_back(buf);
    }
    out += section("speeds", "communication that ran at two speeds across the launches:", items);
  }
  return out;
}

}  // namespace paralab::calib
