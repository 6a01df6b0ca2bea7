// paralab — prediction vs measurement, op by op.
#include "analysis/validate/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>

namespace paralab {

std::string op_class(const OpMeta& m) {
  if (m.kind == "gemm") {
    // Shape class: the role and the decade of FLOPs (cost per FLOP varies by size).
    const double f = std::max(1.0, m.flops);
    const int decade = static_cast<int>(std::floor(std::log10(f)));
    char buf[96];
    std::snprintf(buf, sizeof buf, "gemm %s 1e%d-1e%d FLOP", m.role.c_str(), decade, decade + 1);
    return buf;
  }
  if (m.kind == "collective") return m.collective + " " + m.group;
  if (m.kind == "send" || m.kind == "recv" || m.kind == "sendrecv") return m.kind + " " + m.group;
  return m.kind;
}

namespace {

// rank -> stage from a result's per-rank records.
std::map<int64_t, int64_t> stages_of(const StepResult& r) {
  std::map<int64_t, int64_t> out;
  for (const RankStats& s : r.ranks) out[s.rank] = s.stage;
  return out;
}

}  // namespace

Comparison compare(const LoadedResult& predicted, const LoadedResult& measured, size_t top_n) {
  const StepResult& P = predicted.result;
  const StepResult& M = measured.result;
  if (P.scenario_digest != M.scenario_digest)
    throw std::runtime_error("the results are of different scenarios: " + predicted.file.string() + " is '" +
                             P.scenario + "' (" + P.scenario_digest + "), " + measured.file.string() + " is '" +
                             M.scenario + "' (" + M.scenario_digest + ")");
  Comparison c;
  c.scenario = P.scenario;
  c.predicted_step_s = P.step_time_s;
  c.measured_step_s = M.step_time_s;
  c.step_time_error_pct = M.step_time_s > 0 ? 100.0 * (P.step_time_s - M.step_time_s) / M.step_time_s : 0.0;
  c.exposed_predicted_s = P.breakdown.exposed_comm_s;
  c.exposed_measured_s = M.breakdown.exposed_comm_s;
  c.bubble_predicted = P.bubble_fraction;
  c.bubble_measured = M.bubble_fraction;
  c.host_predicted = P.step_time_s > 0 ? P.breakdown.host_s / P.step_time_s : 0;
  c.host_measured = M.step_time_s > 0 ? M.breakdown.host_s / M.step_time_s : 0;
  c.peak_memory_predicted_gib = P.peak_memory_gib;
  c.peak_memory_measured_gib = M.peak_memory_gib;
  c.per_op = predicted.has_ops && measured.has_ops;
  if (!c.per_op) return c;

  // Index the prediction by (stage, op id).
  const auto p_stage = stages_of(P), m_stage = stages_of(M);
  std::map<std::pair<int64_t, OpId>, size_t> pred;
  for (size_t i = 0; i < P.ops.size(); ++i) {
    auto it = p_stage.find(P.ops[i].rank);
    if (it == p_stage.end()) throw std::runtime_error(predicted.file.string() + ": op on rank " + std::to_string(P.ops[i].rank) + " without a rank record");
    pred[{it->second, P.ops[i].op}] = i;
  }
  std::map<std::string, ClassError> classes;
  struct Scored {
    double ape_sum = 0;  // over the class's scored ops (fractions)
    int64_t n = 0;
  };
  std::map<std::string, Scored> class_scored;
  double ape_sum = 0;
  std::vector<OpError> errors;
  for (size_t i = 0; i < M.ops.size(); ++i) {
    const OpTiming& t = M.ops[i];
    auto st = m_stage.find(t.rank);
    if (st == m_stage.end()) throw std::runtime_error(measured.file.string() + ": op on rank " + std::to_string(t.rank) + " without a rank record");
    auto it = pred.find({st->second, t.op});
    if (it == pred.end())
      throw std::runtime_error("the results have different ops: " + measured.file.string() + " has op " +
                               std::to_string(t.op) + " (" + measured.meta[i].name + ") on rank " + std::to_string(t.rank) +
                               " that " + predicted.file.string() + " lacks for stage " + std::to_string(st->second));
    const OpTiming& p = P.ops[it->second];
    const double pu = p.end_us - p.start_us, mu = t.end_us - t.start_us;
    const OpMeta& meta = measured.meta[i];
    const std::string cls = op_class(meta);
    ClassError& ce = classes[cls];
    ce.cls = cls;
    ++ce.ops;
    ce.predicted_s += pu * 1e-6;
    ce.measured_s += mu * 1e-6;
    ++c.ops_joined;
    if (const std::optional<double> ape = scored_ape(pu, mu)) {
      ape_sum += *ape;
      Scored& cs = class_scored[cls];
      cs.ape_sum += *ape;
      ++cs.n;
      ++c.ops_scored;
    }
    errors.push_back({t.rank, t.op, meta.name, cls, pu, mu});
  }
  // Every measured rank must have run every op its stage's prediction has, and the
  // prediction must cover every stage the measurement has.
  std::map<int64_t, int64_t> pred_per_stage, meas_per_rank;
  for (const auto& [key, idx] : pred) ++pred_per_stage[key.first];
  for (const OpTiming& t : M.ops) ++meas_per_rank[t.rank];
  for (const auto& [rank, stage] : m_stage) {
    const int64_t have = meas_per_rank.count(rank) ? meas_per_rank[rank] : 0;
    if (have == pred_per_stage[stage]) continue;
    std::map<OpId, bool> ran;
    for (const OpTiming& t : M.ops)
      if (t.rank == rank) ran[t.op] = true;
    for (const auto& [key, idx] : pred)
      if (key.first == stage && !ran.count(key.second))
        throw std::runtime_error("the results have different ops: " + predicted.file.string() + " has op " +
                                 std::to_string(key.second) + " (" + predicted.meta[idx].name + ") of stage " +
                                 std::to_string(stage) + " that rank " + std::to_string(rank) + " of " +
                                 measured.file.string() + " lacks");
  }
  for (const auto& [stage, n] : pred_per_stage) {
    bool measured_stage = false;
    for (const auto& [rank, st] : m_stage) measured_stage |= st == stage;
    if (!measured_stage)
      throw std::runtime_error("the results have different ops: " + measured.file.string() + " has no rank of stage " +
                               std::to_string(stage) + " that " + predicted.file.string() + " predicts");
  }
  c.op_mape_pct = c.ops_scored ? 100.0 * ape_sum / static_cast<double>(c.ops_scored) : 0.0;
  for (auto& [cls, ce] : classes) {
    const Scored& cs = class_scored[cls];
    ce.mape_pct = cs.n ? 100.0 * cs.ape_sum / static_cast<double>(cs.n) : 0.0;
    c.by_class.push_back(ce);
  }
  std::sort(c.by_class.begin(), c.by_class.end(), [](const ClassError& a, const ClassError& b) {
    return a.measured_s > b.measured_s || (a.measured_s == b.measured_s && a.cls < b.cls);
  });
  c.ops = errors;
  std::sort(errors.begin(), errors.end(), [](const OpError& a, const OpError& b) {
    const double ea = std::abs(a.predicted_us - a.measured_us), eb = std::abs(b.predicted_us - b.measured_us);
    return ea > eb || (ea == eb && (a.rank < b.rank || (a.rank == b.rank && a.op < b.op)));
  });
  if (errors.size() > top_n) errors.resize(top_n);
  c.largest = std::move(errors);
  return c;
}

nlohmann::json to_json(const Comparison& c) {
  nlohmann::json j;
  j["scenario"] = c.scenario;
  j["predicted_step_time_s"] = c.predicted_step_s;
  j["measured_step_time_s"] = c.measured_step_s;
  j["step_time_error_pct"] = c.step_time_error_pct;
  j["op_mape_pct"] = c.op_mape_pct;
  j["ops_joined"] = c.ops_joined;
  j["ops_scored"] = c.ops_scored;
  j["per_op"] = c.per_op;
  nlohmann::json classes = nlohmann::json::array();
  for (const auto& ce : c.by_class)
    classes.push_back({{"class", ce.cls},
                       {"ops", ce.ops},
                       {"predicted_s", ce.predicted_s},
                       {"measured_s", ce.measured_s},
                       {"error_pct", ce.error_pct()},
                       {"mape_pct", ce.mape_pct}});
  j["by_class"] = classes;
  nlohmann::json largest = nlohmann::json::array();
  for (const auto& e : c.largest)
    largest.push_back({{"rank", e.rank},
                       {"op_id", e.op},
                       {"name", e.name},
                       {"class", e.cls},
                       {"predicted_us", e.predicted_us},
                       {"measured_us", e.measured_us},
                       {"error_us", e.predicted_us - e.measured_us}});
  j["largest_errors"] = largest;
  nlohmann::json exposed = nlohmann::json::object();
  for (int k = 0; k < kCommClasses; ++k)
    exposed[std::string(to_string(static_cast<CommClass>(k)))] = {
        {"predicted_s", c.exposed_predicted_s[static_cast<size_t>(k)]},
        {"measured_s", c.exposed_measured_s[static_cast<size_t>(k)]},
        {"difference_s", c.exposed_predicted_s[static_cast<size_t>(k)] - c.exposed_measured_s[static_cast<size_t>(k)]}};
  j["exposed_comm"] = exposed;
  j["bubble_fraction"] = {{"predicted", c.bubble_predicted}, {"measured", c.bubble_measured},
                          {"difference", c.bubble_predicted - c.bubble_measured}};
  j["host_fraction"] = {{"predicted", c.host_predicted}, {"measured", c.host_measured},
                        {"difference", c.host_predicted - c.host_measured}};
  j["peak_memory_gib"] = {{"predicted", c.peak_memory_predicted_gib}, {"measured", c.peak_memory_measured_gib}};
  return j;
}

std::string to_table(const Comparison& c) {
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof buf, "scenario    %s\nstep time   predicted %.6g s, measured %.6g s: error %+.2f%%\n",
                c.scenario.c_str(), c.predicted_step_s, c.measured_step_s, c.step_time_error_pct);
  out += buf;
  std::snprintf(buf, sizeof buf,
                "bubble      predicted %.2f%%, measured %.2f%%\nhost        predicted %.2f%%, measured %.2f%%\n"
                "memory      predicted %.3f GiB, measured %.3f GiB\n",
                100 * c.bubble_predicted, 100 * c.bubble_measured, 100 * c.host_predicted, 100 * c.host_measured,
                c.peak_memory_predicted_gib, c.peak_memory_measured_gib);
  out += buf;
  out += "exposed communication (s):";
  for (int k = 0; k < kCommClasses; ++k) {
    std::snprintf(buf, sizeof buf, "  %s %.4g/%.4g", std::string(to_string(static_cast<CommClass>(k))).c_str(),
                  c.exposed_predicted_s[static_cast<size_t>(k)], c.exposed_measured_s[static_cast<size_t>(k)]);
    out += buf;
  }
  out += "  (predicted/measured)\n";
  if (!c.per_op) {
    out += "\nper-op comparison needs traces (--trace) from both runs\n";
    return out;
  }
  std::snprintf(buf, sizeof buf, "ops         %lld joined, %lld scored: MAPE %.2f%%\n\n", (long long)c.ops_joined,
                (long long)c.ops_scored, c.op_mape_pct);
  out += buf;
  std::snprintf(buf, sizeof buf, "%-44s %7s %12s %12s %9s %9s\n", "op class", "ops", "predicted s", "measured s", "error", "MAPE");
  out += buf;
  for (const auto& ce : c.by_class) {
    std::snprintf(buf, sizeof buf, "%-44s %7lld %12.6g %12.6g %+8.1f%% %8.1f%%\n", ce.cls.c_str(), (long long)ce.ops,
                  ce.predicted_s, ce.measured_s, ce.error_pct(), ce.mape_pct);
    out += buf;
  }
  out += "\nlargest errors:\n";
  for (const auto& e : c.largest) {
    std::snprintf(buf, sizeof buf, "  rank %-4lld %-44s predicted %10.1f us  measured %10.1f us\n", (long long)e.rank,
                  e.name.c_str(), e.predicted_us, e.measured_us);
    out += buf;
  }
  return out;
}

}  // namespace paralab
