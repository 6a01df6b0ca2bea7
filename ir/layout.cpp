// paralab — rank layout arithmetic (Megatron order tp-cp-dp-pp, tp fastest).
#include "ir/layout.hpp"

#include <stdexcept>

#include "ir/error.hpp"

namespace paralab {

Layout::Layout(int64_t tp, int64_t cp, int64_t dp, int64_t pp, int64_t devices_per_node)
    : tp_(tp), cp_(cp), dp_(dp), pp_(pp), per_node_(devices_per_node) {
  if (tp < 1 || cp < 1 || dp < 1 || pp < 1 || devices_per_node < 1)
    throw InternalError("Layout: every parallel degree must be >= 1");
}

Coord Layout::coord(int64_t r) const {
  if (r < 0 || r >= world()) throw InternalError("Layout::coord: rank out of range");
  Coord c;
  c.tp = r % tp_;
  r /= tp_;
  c.cp = r % cp_;
  r /= cp_;
  c.dp = r % dp_;
  c.pp = r / dp_;
  return c;
}

int64_t Layout::rank(const Coord& c) const {
  return c.tp + tp_ * (c.cp + cp_ * (c.dp + dp_ * c.pp));
}

int64_t Layout::group_size(GroupKind g) const {
  switch (g) {
    case GroupKind::tp: return tp_;
    case GroupKind::cp: return cp_;
    case GroupKind::dp: return dp_ * cp_;
    case GroupKind::pp: return pp_;
    case GroupKind::embd: return pp_ > 1 ? 2 : 1;
    case GroupKind::mp: return tp_ * pp_;
    case GroupKind::world: return world();
    case GroupKind::kCount: break;
  }
  throw InternalError("Layout::group_size: bad group kind");
}

int64_t Layout::member_at(GroupKind g, int64_t r, int64_t i) const {
  Coord c = coord(r);
  switch (g) {
    case GroupKind::tp: c.tp = i; break;
    case GroupKind::cp: c.cp = i; break;
    case GroupKind::dp: c.cp = i % cp_; c.dp = i / cp_; break;
    case GroupKind::pp: c.pp = i; break;
    case GroupKind::embd: c.pp = (i == 0) ? 0 : pp_ - 1; break;
    case GroupKind::mp: c.tp = i % tp_; c.pp = i / tp_; break;
    case GroupKind::world: return i;
    case GroupKind::kCount: throw InternalError("Layout::member_at: bad group kind");
  }
  return rank(c);
}

int64_t Layout::index_in_group(GroupKind g, int64_t r) const {
  const Coord c = coord(r);
  switch (g) {
    case GroupKind::tp: return c.tp;
    case GroupKind::cp: return c.cp;
    case GroupKind::dp: return c.cp + cp_ * c.dp;
    case GroupKind::pp: return c.pp;
    case GroupKind::embd: return c.pp == 0 ? 0 : 1;
    case GroupKind::mp: return c.tp + tp_ * c.pp;
    case GroupKind::world: return r;
    case GroupKind::kCount: break;
  }
  throw InternalError("Layout::index_in_group: bad group kind");
}

std::vector<int64_t> Layout::members(GroupKind g, int64_t r) const {
  const int64_t n = group_size(g);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out.push_back(member_at(g, r, i));
  return out;
}

std::vector<std::vector<int64_t>> Layout::all_groups(GroupKind g) const {
  std::vector<std::vector<int64_t>> out;
  std::vector<char> seen(static_cast<size_t>(world()), 0);
  for (int64_t r = 0; r < world(); ++r) {
    if (seen[static_cast<size_t>(r)]) continue;
    if (g == GroupKind::embd && !(coord(r).pp == 0 || coord(r).pp == pp_ - 1)) continue;
    auto m = members(g, r);
    for (int64_t x : m) seen[static_cast<size_t>(x)] = 1;
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<std::vector<int64_t>> Layout::groups_in_stage(GroupKind g, int64_t stage) const {
  if (g != GroupKind::tp && g != GroupKind::cp && g != GroupKind::dp)
    throw InternalError("Layout::groups_in_stage: only tp, cp and dp groups lie in one stage");
  std::vector<std::vector<int64_t>> out;
  const int64_t first = stage * tp_ * cp_ * dp_;
  const int64_t last = first + tp_ * cp_ * dp_;
  for (int64_t r = first; r < last; ++r)
    if (index_in_group(g, r) == 0) out.push_back(members(g, r));
  return out;
}

}  // namespace paralab
