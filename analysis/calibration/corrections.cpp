// paralab — fitting the correction table (corrections.hpp).
#include "analysis/calibration/corrections.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "analysis/calibration/lad_fit.hpp"
#include "analysis/stats.hpp"

namespace paralab::calib {

std::pair<int64_t, int64_t> size_bucket(double bytes) {
  if (bytes < 4) return {0, 4};
  int64_t lo = 4;
  while (static_cast<double>(lo) * 4 <= bytes && lo < (int64_t{1} << 60)) lo *= 4;
  return {lo, lo * 4};
}

std::vector<OpClass> class_chain(CostKind cost, const OpFacts& f) {
  std::vector<OpClass> chain;
  OpClass c;
  c.cost = cost;
  chain.push_back(c);
  c.family = family_of(f.kind);
  chain.push_back(c);
  c.kind = f.kind;
  chain.push_back(c);
  if (f.kind == OpKind::collective && f.collective) {
    c.collective = f.collective;
    chain.push_back(c);
  }
  if (is_comm(f.kind)) {
    if (!f.span) return chain;  // a call over one rank: no deeper class applies
    c.span = f.span;
    chain.push_back(c);
  }
  c.phase = f.phase;
  chain.push_back(c);
  const auto [lo, hi] = size_bucket(f.bytes);
  c.min_bytes = lo;
  c.max_bytes = hi;
  chain.push_back(c);
  return chain;
}

namespace {

// A class as a map key (OpClass has no order of its own).
using ClassKey = std::tuple<int, int, int, int, int, int, int64_t, int64_t>;
ClassKey key_of(const OpClass& c) {
  auto opt = [](const auto& o) { return o ? static_cast<int>(*o) : -1; };
  return {static_cast<int>(c.cost), opt(c.family), opt(c.kind), opt(c.collective), opt(c.span), opt(c.phase), c.min_bytes,
          c.max_bytes};
}

struct Node {
  OpClass cls;
  std::vector<size_t> members;  // indices of samples
  ClassKey parent{};
  bool has_parent = false;
};

}  // namespace

std::vector<CorrectionRow> fit_corrections(const CorrectionSamples& s) {
  std::map<ClassKey, Node> nodes;
  for (size_t i = 0; i < s.samples.size(); ++i) {
    const std::vector<OpClass> chain = class_chain(s.samples[i].cost, s.samples[i].facts);
    for (size_t d = 0; d < chain.size(); ++d) {
      Node& n = nodes[key_of(chain[d])];
      n.cls = chain[d];
      n.members.push_back(i);
      if (d > 0) {
        n.parent = key_of(chain[d - 1]);
        n.has_parent = true;
      }
    }
  }
  // Top down (a parent's depth is below its children's), so each node knows what its ops take
  // without it.
  std::vector<const ClassKey*> order;
  for (const auto& [k, n] : nodes) order.push_back(&k);
  std::stable_sort(order.begin(), order.end(),
                   [&](const ClassKey* a, const ClassKey* b) { return nodes[*a].cls.depth() < nodes[*b].cls.depth(); });
  std::map<ClassKey, Correction> effective;  // what the class's ops take from the rows written so far
  std::vector<CorrectionRow> rows;
  for (const ClassKey* k : order) {
    const Node& n = nodes[*k];
    const Correction inherited = n.has_parent ? effective[n.parent] : Correction{};
    effective[*k] = inherited;
    if (static_cast<int64_t>(n.members.size()) < CorrectionTable::kMinSamples) continue;
    const bool time = n.cls.cost == CostKind::time;
    std::vector<LadPoint> pts;
    std::vector<double> ys, xs;
    for (size_t i : n.members) {
      const CorrectionSample& c = s.samples[i];
      pts.push_back({c.measured_us, c.modeled_us, time ? (c.measured_us > 0 ? 1.0 / c.measured_us : 0.0) : 1.0});
      ys.push_back(c.measured_us);
      xs.push_back(c.modeled_us);
    }
    const LadFit f = fit_lad(pts, time);
    const Correction fitted{f.fixed, f.factor};
    // Written where it moves the class's typical op by more than the tolerance.
    const double x = median(xs), y = std::max(median(ys), 1e-3);
    const double moved = std::fabs(fitted.apply(x) - inherited.apply(x));
    if (moved <= kWriteTolerance * y && std::fabs(fitted.factor - inherited.factor) <= kWriteTolerance) continue;
    effective[*k] = fitted;
    rows.push_back(CorrectionRow{n.cls, fitted, static_cast<int64_t>(n.members.size()), f.mape_pct});
  }
  return rows;
}

}  // namespace paralab::calib
