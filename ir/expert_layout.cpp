// paralab — Megatron's folded expert layout (ir/expert_layout.hpp).
#include "ir/expert_layout.hpp"

#include "ir/error.hpp"
#include <string>

namespace paralab {

ExpertLayout::ExpertLayout(const Layout& dense, int64_t expert_tensor, int64_t expert)
    : etp_(expert_tensor), ep_(expert), edp_(0), per_stage_(dense.tp() * dense.cp() * dense.dp()) {
  if (etp_ < 1 || ep_ < 1 || per_stage_ % (etp_ * ep_) != 0)
    throw InternalError("expert layout: expert_tensor x expert = " + std::to_string(etp_ * ep_) +
                                " does not divide tensor x context x data = " + std::to_string(per_stage_));
  edp_ = per_stage_ / (etp_ * ep_);
}

int64_t ExpertLayout::size(ExpertGroup g) const {
  switch (g) {
    case ExpertGroup::etp: return etp_;
    case ExpertGroup::ep: return ep_;
    case ExpertGroup::edp: return edp_;
  }
  return 1;
}

ExpertCoord ExpertLayout::coord(int64_t rank) const {
  const int64_t i = rank % per_stage_;
  return {i % etp_, (i / etp_) % ep_, i / (etp_ * ep_), rank / per_stage_};
}

int64_t ExpertLayout::rank(const ExpertCoord& c) const {
  return c.etp + etp_ * (c.ep + ep_ * c.edp) + per_stage_ * c.pp;
}

std::vector<int64_t> ExpertLayout::members(ExpertGroup g, int64_t r) const {
  const ExpertCoord c = coord(r);
  std::vector<int64_t> out;
  for (int64_t k = 0; k < size(g); ++k) {
    ExpertCoord m = c;
    (g == ExpertGroup::etp ? m.etp : g == ExpertGroup::ep ? m.ep : m.edp) = k;
    out.push_back(rank(m));
  }
  return out;
}

}  // namespace paralab
