// paralab — compares a predicted and a measured step (or any two results of one scenario):
// joined op by op (a measured op on rank r joins the prediction of the same op id on r's
// stage), errors by op class, the mean absolute percentage error over ops, the largest errors,
// and the differences in step time, exposed communication, bubble and host overhead.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/stats.hpp"
#include "results/result_io.hpp"

namespace paralab {

struct OpError {
  int64_t rank = 0;
  OpId op = 0;
  std::string name, cls;
  double predicted_us = 0, measured_us = 0;
};

struct ClassError {
  std::string cls;  // "gemm linear_fwd 1e9-1e10 FLOP", "layernorm_fwd", "all_reduce tp", "send pp", ...
  int64_t ops = 0;
  double predicted_s = 0, measured_s = 0;  // summed over the class's ops
  double mape_pct = 0;                     // mean |p - m| / m over the class's ops
  [[nodiscard]] double error_pct() const { return measured_s > 0 ? 100.0 * (predicted_s - measured_s) / measured_s : 0.0; }
};

struct Comparison {
  std::string scenario;
  double predicted_step_s = 0, measured_step_s = 0;
  double step_time_error_pct = 0;  // 100 (predicted - measured) / measured
  double op_mape_pct = 0;          // over joined ops with a measurable duration
  int64_t ops_joined = 0, ops_scored = 0;
  bool per_op = false;             // both inputs had per-op timings (traces)
  std::vector<ClassError> by_class;  // largest measured time first
  std::vector<OpError> largest;      // largest absolute error first
  std::vector<OpError> ops;          // every joined op, in the measurement's order (reports)
  std::array<double, kCommClasses> exposed_predicted_s{}, exposed_measured_s{};
  double bubble_predicted = 0, bubble_measured = 0;  // fractions of the step
  double host_predicted = 0, host_measured = 0;      // fractions of the step (Breakdown::host_s)
  double peak_memory_predicted_gib = 0, peak_memory_measured_gib = 0;
};

// Throws std::runtime_error when the results are of different scenarios (digests differ) or
// when one lacks ops the other has (names the first missing op).
Comparison compare(const LoadedResult& predicted, const LoadedResult& measured, size_t top_n = 10);

// Ops shorter than kMinScoredUs in both results are joined but not scored (analysis/stats.hpp's
// scored_ape: the one scoring rule of every op MAPE).
using calib::kMinScoredUs;
using calib::scored_ape;

nlohmann::json to_json(const Comparison& c);
std::string to_table(const Comparison& c);

// The op class a trace op belongs to (exposed for calibration and tests).
std::string op_class(const OpMeta& m);

}  // namespace paralab
