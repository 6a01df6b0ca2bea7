// paralab — the correction table's classes and lookup (semantics in correction.hpp).
#include "ir/correction.hpp"

#include <algorithm>
#include <stdexcept>

#include "ir/enum_names.hpp"

namespace paralab {

OpFamily family_of(OpKind k) { return is_comm(k) ? OpFamily::comm : OpFamily::compute; }

int OpClass::depth() const {
  return (family ? 1 : 0) + (kind ? 1 : 0) + (collective ? 1 : 0) + (span ? 1 : 0) + (phase ? 1 : 0) +
         (has_bucket() ? 1 : 0);
}

bool OpClass::contains(const OpFacts& f) const {
  if (family && *family != family_of(f.kind)) return false;
  if (kind && *kind != f.kind) return false;
  if (collective && (!f.collective || *collective != *f.collective)) return false;
  if (span && (!f.span || *span != *f.span)) return false;
  if (phase && *phase != f.phase) return false;
  if (has_bucket() && !(f.bytes >= static_cast<double>(min_bytes) && f.bytes < static_cast<double>(max_bytes)))
    return false;
  return true;
}

std::string OpClass::label() const {
  std::string path;
  auto add = [&](std::string_view part) { path += (path.empty() ? "" : "/") + std::string(part); };
  if (family) add(enum_to_string(*family));
  if (kind) add(enum_to_string(*kind));
  if (collective) add(enum_to_string(*collective));
  if (span) add(enum_to_string(*span));
  if (phase) add(enum_to_string(*phase));
  if (has_bucket()) add("[" + std::to_string(min_bytes) + "," + std::to_string(max_bytes) + ")");
  return std::string(enum_to_string(cost)) + " " + (path.empty() ? "(every op)" : path);
}

// The levels that apply to an op of kind k, top down: family, kind, collective (collectives
// only), span (communication only), phase, bucket. A valid class names a prefix of them.
std::string validate_class(const OpClass& c) {
  if (c.kind && c.family && family_of(*c.kind) != *c.family)
    return "op kind " + std::string(enum_to_string(*c.kind)) + " is not of family " + std::string(enum_to_string(*c.family));
  if (c.kind && !c.family) return "an op kind needs its family (compute or comm) above it";
  const bool comm = c.family && *c.family == OpFamily::comm;
  const bool coll = c.kind && *c.kind == OpKind::collective;
  if (c.collective && !coll) return "a collective kind applies to op = collective only";
  if (c.span && !comm) return "a span applies to communication (family = comm) only";
  if (c.span && !c.kind) return "a span needs the op kind above it";
  if (c.span && coll && !c.collective) return "a collective's span needs its collective kind above it";
  if (c.phase) {
    if (!c.kind) return "a phase needs the op kind above it";
    if (coll && !c.collective) return "a collective's phase needs its collective kind above it";
    if (comm && !c.span) return "a communication op's phase needs its span above it";
  }
  if (c.max_bytes > 0 || c.min_bytes > 0) {
    if (!c.phase) return "a size bucket needs the phase above it";
    if (c.min_bytes < 0 || c.max_bytes <= c.min_bytes) return "a size bucket needs 0 <= min_bytes < max_bytes";
  }
  return {};
}

CorrectionTable::CorrectionTable(std::vector<CorrectionRow> rows) : rows_(std::move(rows)) {
  for (size_t i = 0; i < rows_.size(); ++i) {
    const CorrectionRow& r = rows_[i];
    if (const std::string why = validate_class(r.cls); !why.empty())
      throw std::invalid_argument("correction " + r.cls.label() + ": " + why);
    if (r.cls.cost != CostKind::time && r.c.factor != 1.0)
      throw std::invalid_argument("correction " + r.cls.label() + ": a gap has no modeled time to scale, so its factor must be 1");
    if (!(r.c.factor >= 0) || !(r.c.fixed_us > -1e9 && r.c.fixed_us < 1e9))
      throw std::invalid_argument("correction " + r.cls.label() + ": factor >= 0 and a finite fixed_us are required");
    for (size_t j = 0; j < i; ++j) {
      OpClass a = rows_[j].cls, b = r.cls;
      const bool buckets = a.has_bucket() && b.has_bucket();
      if (buckets) {
        if (a.min_bytes < b.max_bytes && b.min_bytes < a.max_bytes) {
          a.min_bytes = b.min_bytes = a.max_bytes = b.max_bytes = 0;
          if (a == b) throw std::invalid_argument("corrections " + rows_[j].cls.label() + " and " + r.cls.label() + " overlap");
        }
      } else if (a == b) {
        throw std::invalid_argument("two corrections for " + r.cls.label());
      }
    }
  }
  for (size_t i = 0; i < rows_.size(); ++i) deepest_first_.push_back(i);
  std::stable_sort(deepest_first_.begin(), deepest_first_.end(),
                   [&](size_t a, size_t b) { return rows_[a].cls.depth() > rows_[b].cls.depth(); });
}

Correction CorrectionTable::find(CostKind cost, const OpFacts& f) const {
  for (size_t i : deepest_first_) {
    const CorrectionRow& r = rows_[i];
    if (r.cls.cost == cost && r.cls.contains(f)) return r.c;
  }
  return Correction{};
}

}  // namespace paralab
