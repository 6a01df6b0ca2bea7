// paralab — the collective algorithm registry: (collective kind, algorithm) -> builder.
// A new algorithm is a new collective_<name>.cpp plus one line here; the network model never
// switches on algorithms. The first entry of a kind is its default and its fallback.
#include <iterator>
#include <string>

#include "ir/error.hpp"
#include "sim/net/collective.hpp"

namespace paralab::sim {

namespace {

constexpr AlgoEntry kRegistry[] = {
    {CollKind::all_reduce, CollectiveAlgo::ring, AlgoId::ring, build_ring_all_reduce},
    {CollKind::all_reduce, CollectiveAlgo::tree, AlgoId::tree, build_tree_all_reduce},
    {CollKind::all_reduce, CollectiveAlgo::hierarchical, AlgoId::hierarchical,
     build_hier_all_reduce},
    {CollKind::all_gather, CollectiveAlgo::ring, AlgoId::ring, build_ring_all_gather},
    {CollKind::all_gather, CollectiveAlgo::hierarchical, AlgoId::hierarchical,
     build_hier_all_gather},
    {CollKind::reduce_scatter, CollectiveAlgo::ring, AlgoId::ring, build_ring_reduce_scatter},
    {CollKind::reduce_scatter, CollectiveAlgo::hierarchical, AlgoId::hierarchical,
     build_hier_reduce_scatter},
    {CollKind::broadcast, CollectiveAlgo::ring, AlgoId::ring, build_ring_broadcast},
    {CollKind::reduce, CollectiveAlgo::ring, AlgoId::ring, build_ring_reduce},
    {CollKind::gather, CollectiveAlgo::automatic, AlgoId::direct, build_direct_gather},
    {CollKind::scatter, CollectiveAlgo::automatic, AlgoId::direct, build_direct_scatter},
    {CollKind::all_to_all, CollectiveAlgo::automatic, AlgoId::direct, build_direct_all_to_all},
    {CollKind::p2p, CollectiveAlgo::automatic, AlgoId::direct, build_direct_p2p},
};

}  // namespace

std::span<const AlgoEntry> algorithm_registry() { return kRegistry; }

size_t find_algorithm(CollKind kind, CollectiveAlgo algo) {
  size_t fallback = std::size(kRegistry);
  for (size_t i = 0; i < std::size(kRegistry); ++i) {
    if (kRegistry[i].kind != kind) continue;
    if (kRegistry[i].algo == algo) return i;
    if (fallback == std::size(kRegistry)) fallback = i;
  }
  if (fallback == std::size(kRegistry))
    throw InternalError("no collective algorithm registered for " + std::string(to_string(kind)));
  return fallback;
}

}  // namespace paralab::sim
