// paralab tests — Megatron's rank order (tp fastest, then cp, dp, pp) and its groups.
#include <catch2/catch.hpp>

#include "ir/layout.hpp"

using namespace paralab;

TEST_CASE("ranks map to (tp, cp, dp, pp) with tp fastest", "[ir][layout]") {
  const Layout L(2, 2, 3, 4, 8);  // tp 2, cp 2, dp 3, pp 4 -> 48 ranks
  CHECK(L.world() == 48);
  for (int64_t r = 0; r < L.world(); ++r) CHECK(L.rank(L.coord(r)) == r);
  CHECK(L.coord(1) == Coord{1, 0, 0, 0});
  CHECK(L.coord(2) == Coord{0, 1, 0, 0});
  CHECK(L.coord(4) == Coord{0, 0, 1, 0});
  CHECK(L.coord(12) == Coord{0, 0, 0, 1});
  CHECK(L.node_of(12) == 1);
  CHECK(L.representative(3) == 36);
}

TEST_CASE("groups hold the ranks that differ only in their own coordinate", "[ir][layout]") {
  const Layout L(2, 2, 3, 4, 8);
  CHECK(L.members(GroupKind::tp, 5) == std::vector<int64_t>{4, 5});
  CHECK(L.members(GroupKind::cp, 5) == std::vector<int64_t>{5, 7});
  // The data-parallel group includes the context-parallel replicas (Megatron's DP-with-CP).
  CHECK(L.members(GroupKind::dp, 0) == std::vector<int64_t>{0, 2, 4, 6, 8, 10});
  CHECK(L.members(GroupKind::pp, 1) == std::vector<int64_t>{1, 13, 25, 37});
  CHECK(L.members(GroupKind::embd, 13) == std::vector<int64_t>{1, 37});
  CHECK(L.members(GroupKind::mp, 0).size() == 8);
  for (auto g : {GroupKind::tp, GroupKind::cp, GroupKind::dp, GroupKind::pp}) {
    int64_t covered = 0;
    for (const auto& grp : L.all_groups(g)) covered += static_cast<int64_t>(grp.size());
    CHECK(covered == L.world());
    for (int64_t r = 0; r < L.world(); ++r)
      CHECK(L.member_at(g, r, L.index_in_group(g, r)) == r);
  }
  CHECK(L.groups_in_stage(GroupKind::tp, 2).size() == 6);
  for (const auto& grp : L.groups_in_stage(GroupKind::dp, 2))
    for (int64_t r : grp) CHECK(L.stage_of(r) == 2);
}

TEST_CASE("with TP = 8 on 8-GPU nodes a tensor group is one node", "[ir][layout]") {
  const Layout L(8, 1, 4, 2, 8);
  for (int64_t r = 0; r < L.world(); ++r)
    for (int64_t m : L.members(GroupKind::tp, r)) CHECK(L.node_of(m) == L.node_of(r));
}
