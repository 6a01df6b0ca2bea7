// paralab — where expert layers live: Megatron-LM's parallel folding (Liu et al., "MoE Parallel
// Folding", 2025; megatron/core/parallel_state.py, the expert RankGenerator with order
// "tp-ep-dp-pp"). Attention and dense layers use tensor x context x data (ir/layout.hpp); the
// expert layers of the same pipeline stage regroup the same tensor*context*data ranks as
// expert_tensor x expert x expert_data, expert tensor fastest:
//   i = rank mod (tp*cp*dp),  etp = i mod ETP,  ep = (i / ETP) mod EP,  edp = i / (ETP*EP).
// Expert weights are split over ETP x EP; their gradients are reduced over EDP.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/layout.hpp"

namespace paralab {

enum class ExpertGroup : uint8_t { etp, ep, edp };

struct ExpertCoord {
  int64_t etp = 0, ep = 0, edp = 0, pp = 0;
  bool operator==(const ExpertCoord&) const = default;
};

class ExpertLayout {
 public:
  // Requires expert_tensor * expert to divide the layout's tp*cp*dp (validated at load).
  ExpertLayout(const Layout& dense, int64_t expert_tensor, int64_t expert);

  [[nodiscard]] int64_t etp() const { return etp_; }
  [[nodiscard]] int64_t ep() const { return ep_; }
  [[nodiscard]] int64_t edp() const { return edp_; }
  [[nodiscard]] int64_t size(ExpertGroup g) const;

  [[nodiscard]] ExpertCoord coord(int64_t rank) const;
  [[nodiscard]] int64_t rank(const ExpertCoord& c) const;
  // Members of the group of kind `g` containing `rank`, in group order.
  [[nodiscard]] std::vector<int64_t> members(ExpertGroup g, int64_t rank) const;
  // The experts rank `rank` holds: [first, first + count) of num_experts.
  [[nodiscard]] int64_t first_local_expert(int64_t rank, int64_t num_experts) const {
    return coord(rank).ep * (num_experts / ep_);
  }

 private:
  int64_t etp_, ep_, edp_, per_stage_;
};

}  // namespace paralab
