// paralab — the correction table fitted to executions (docs/calibration.md, "Corrections"): every
// class of the fixed hierarchy (ir/correction.hpp) with at least CorrectionTable::kMinSamples
// samples gets one robust fit (lad_fit.hpp) of measured = fixed + factor x modeled (time; a
// gap: measured = fixed + the simulated gap), weighted by 1 / measured for times (the summed
// relative error, what the per-op MAPE scores) and alike for gaps (their median). A class is
// written only where its correction differs from the one its ops would otherwise take (its
// nearest written ancestor's, or none) by more than kWriteTolerance of its median measured value,
// so the table holds what the data say and no more.
#pragma once

#include "analysis/calibration/samples.hpp"
#include "ir/correction.hpp"

namespace paralab::calib {

inline constexpr double kWriteTolerance = 0.01;

// Size buckets of the fit: [4^k, 4^(k+1)) bytes (k >= 0; below 4 bytes: [0, 4)).
std::pair<int64_t, int64_t> size_bucket(double bytes);

// The classes an op belongs to, top down: (every op), family, kind, collective, span, phase,
// bucket (the levels that apply to it; ir/correction.hpp).
std::vector<OpClass> class_chain(CostKind cost, const OpFacts& f);

std::vector<CorrectionRow> fit_corrections(const CorrectionSamples& s);

}  // namespace paralab::calib
