// paralab — calibration from measured step times (step_time_fit.hpp).
#include "analysis/calibration/step_time_fit.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <Eigen/Dense>

#include "ir/step_ir.hpp"
#include "sim/simulate.hpp"

namespace paralab::calib {

namespace {

constexpr double kParallel = 0.05;  // a column within 5 % of the others' span adds nothing

std::vector<StepTimeTerm> candidate_terms() {
  OpClass compute{CostKind::time, OpFamily::compute};
  OpClass comm{CostKind::time, OpFamily::comm};
  OpClass dispatch{CostKind::dispatch, OpFamily::compute};
  return {{"compute", compute, true, 1.0, 0.05, ""}, {"communication", comm, true, 1.0, 1.0, ""},
          {"dispatch", dispatch, false, 0.0, 0.0, ""}};
}

// The base table with each term's row set to its value (added when the base has none).
CorrectionTable with_terms(const CorrectionTable& base, const std::vector<StepTimeTerm>& terms) {
  std::vector<CorrectionRow> rows = base.rows();
  for (const StepTimeTerm& t : terms) {
    auto it = std::find_if(rows.begin(), rows.end(), [&](const CorrectionRow& r) { return r.cls == t.cls; });
    if (it == rows.end()) it = rows.insert(rows.end(), CorrectionRow{t.cls, {}, 0, 0});
    if (t.factor) it->c.factor = t.value;
    else it->c.fixed_us = t.value;
  }
  return CorrectionTable(std::move(rows));
}

// Finite-difference step of a term: 5 % of a factor, 2 us of a gap.
double step_of(const StepTimeTerm& t) { return t.factor ? 0.05 * std::max(t.value, 0.1) : 2.0; }

void clamp(StepTimeTerm& t) { t.value = std::clamp(t.value, t.min_value, t.factor ? 20.0 : 1e5); }

// argmin_d |J d - r|_1 by iteratively reweighted least squares (exact when J is square).
Eigen::VectorXd solve(const Eigen::MatrixXd& J, const Eigen::VectorXd& r) {
  Eigen::VectorXd d = J.colPivHouseholderQr().solve(r);
  if (J.rows() <= J.cols()) return d;
  for (int it = 0; it < 50; ++it) {
    Eigen::VectorXd w = (J * d - r).cwiseAbs().cwiseMax(1e-9).cwiseInverse().cwiseSqrt();
    const Eigen::VectorXd next = (w.asDiagonal() * J).colPivHouseholderQr().solve(w.asDiagonal() * r);
    if ((next - d).lpNorm<Eigen::Infinity>() < 1e-12) return next;
    d = next;
  }
  return d;
}

// Relative residuals of every run under `table`, and the simulated steps.
Eigen::VectorXd residuals(const std::vector<StepTimeRun>& runs, const CorrectionTable& table, std::vector<double>* steps) {
  Eigen::VectorXd r(static_cast<Eigen::Index>(runs.size()));
  if (steps) steps->assign(runs.size(), 0.0);
  for (size_t i = 0; i < runs.size(); ++i) {
    const double s = simulated_step_s(runs[i].scenario, table);
    r(static_cast<Eigen::Index>(i)) = (runs[i].measured_s - s) / runs[i].measured_s;
    if (steps) (*steps)[i] = s;
  }
  return r;
}

// Columns of J for `idx` terms at the current values.
Eigen::MatrixXd jacobian(const std::vector<StepTimeRun>& runs, const CorrectionTable& base, std::vector<StepTimeTerm>& terms,
                         const std::vector<size_t>& idx, const Eigen::VectorXd& r0) {
  Eigen::MatrixXd J(static_cast<Eigen::Index>(runs.size()), static_cast<Eigen::Index>(idx.size()));
  for (size_t c = 0; c < idx.size(); ++c) {
    StepTimeTerm& t = terms[idx[c]];
    const double h = step_of(t), keep = t.value;
    t.value += h;
    J.col(static_cast<Eigen::Index>(c)) = (residuals(runs, with_terms(base, terms), nullptr) - r0) / h;
    t.value = keep;
  }
  return J;
}

// Which terms the runs determine: largest effect first, each only if not (nearly) parallel to
// the span of those already in and while runs remain.
std::vector<size_t> select_terms(const Eigen::MatrixXd& J, std::vector<StepTimeTerm>& terms, size_t runs) {
  std::vector<size_t> order(terms.size());
  for (size_t j = 0; j < order.size(); ++j) order[j] = j;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return J.col(static_cast<Eigen::Index>(a)).norm() > J.col(static_cast<Eigen::Index>(b)).norm();
  });
  std::vector<size_t> in;
  for (size_t j : order) {
    const Eigen::VectorXd c = J.col(static_cast<Eigen::Index>(j));
    // An effect below a millionth of the step per unit: these runs do not exercise it.
    if (c.norm() < 1e-6) {
      terms[j].why_not = "no effect on these runs' step times";
      continue;
    }
    if (in.size() == runs) {
      terms[j].why_not = "needs more runs (" + std::to_string(runs) + " step time" + (runs == 1 ? "" : "s") + " fit " +
                         std::to_string(runs) + " term" + (runs == 1 ? "" : "s") + ")";
      continue;
    }
    if (!in.empty()) {
      Eigen::MatrixXd S(J.rows(), static_cast<Eigen::Index>(in.size()));
      for (size_t k = 0; k < in.size(); ++k) S.col(static_cast<Eigen::Index>(k)) = J.col(static_cast<Eigen::Index>(in[k]));
      const Eigen::VectorXd rest = c - S * S.colPivHouseholderQr().solve(c);
      if (rest.norm() < kParallel * c.norm()) {
        std::string names;
        for (size_t k : in) names += (names.empty() ? "" : ", ") + terms[k].name;
        terms[j].why_not = "indistinguishable from " + names + " on these runs (its effect on their step times is parallel to theirs)";
        continue;
      }
    }
    in.push_back(j);
  }
  return in;
}

}  // namespace

double simulated_step_s(const Scenario& s, const CorrectionTable& table) {
  Scenario c = s;
  c.topology.calibration.corrections = table;
  if (c.topology.calibration.schema_version == 0) c.topology.calibration.schema_version = kCalibrationSchema;
  return sim::simulate(build_step_ir(c)).result.step_time_s;
}

StepTimeFit fit_step_times(const std::vector<StepTimeRun>& runs) {
  if (runs.empty()) throw std::invalid_argument("no runs to fit: give at least one scenario with its measured step time");
  for (const StepTimeRun& r : runs) {
    if (!(r.measured_s > 0) || !std::isfinite(r.measured_s))
      throw std::invalid_argument("run '" + r.label + "': the measured step time must be > 0 s");
    if (r.scenario.topology.name != runs[0].scenario.topology.name)
      throw std::invalid_argument("run '" + r.label + "' is on topology '" + r.scenario.topology.name + "', run '" + runs[0].label +
                                  "' on '" + runs[0].scenario.topology.name + "': corrections describe one machine, fit each apart");
  }
  const CorrectionTable base = runs[0].scenario.topology.calibration.corrections;
  StepTimeFit fit;
  fit.terms = candidate_terms();
  for (StepTimeTerm& t : fit.terms)  // start from the base's rows where it has them
    for (const CorrectionRow& row : base.rows())
      if (row.cls == t.cls) t.value = t.factor ? row.c.factor : row.c.fixed_us;
  std::vector<size_t> in;
  Eigen::VectorXd r = residuals(runs, with_terms(base, fit.terms), &fit.before_s);
  for (int it = 0; it < 8 && r.lpNorm<Eigen::Infinity>() > 1e-5; ++it) {
    std::vector<size_t> all(fit.terms.size());
    for (size_t j = 0; j < all.size(); ++j) all[j] = j;
    if (it == 0) in = select_terms(jacobian(runs, base, fit.terms, all, r), fit.terms, runs.size());
    if (in.empty()) break;
    const Eigen::VectorXd d = solve(jacobian(runs, base, fit.terms, in, r), -r);  // r + J d = 0
    for (size_t k = 0; k < in.size(); ++k) {
      fit.terms[in[k]].value += d(static_cast<Eigen::Index>(k));
      clamp(fit.terms[in[k]]);
    }
    r = residuals(runs, with_terms(base, fit.terms), nullptr);
    fit.iterations = it + 1;
  }
  for (StepTimeTerm& t : fit.terms)
    if (t.why_not.empty() && std::find_if(in.begin(), in.end(), [&](size_t k) { return &fit.terms[k] == &t; }) == in.end())
      t.why_not = "not needed: the simulated steps already match the measured ones";
  std::vector<StepTimeTerm> fitted;
  for (size_t k : in) {
    StepTimeTerm& t = fit.terms[k];
    t.at_bound = t.value <= t.min_value || t.value >= (t.factor ? 20.0 : 1e5);
    fitted.push_back(t);
  }
  fit.table = with_terms(base, fitted);
  residuals(runs, fit.table, &fit.after_s);
  return fit;
}

}  // namespace paralab::calib
