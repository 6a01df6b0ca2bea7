// paralab — per-rank hardware draws and colour refinement into classes (rank_classes.hpp).
#include "sim/engine/rank_classes.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace paralab::sim {

namespace {

constexpr double kTwoPi = 6.283185307179586;

// SplitMix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA
// 2014): a stateless hash of (seed, rank), so a rank's draw depends on nothing else.
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
double unit_open(uint64_t x) { return (static_cast<double>(x >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)

// A standard normal deviate for (seed, rank) by Box-Muller (Box and Muller 1958).
double normal(uint64_t seed, int64_t rank) {
  const uint64_t a = splitmix64(seed ^ splitmix64(static_cast<uint64_t>(rank) * 2 + 1));
  const uint64_t b = splitmix64(a);
  return std::sqrt(-2.0 * std::log(unit_open(a))) * std::cos(kTwoPi * unit_open(b));
}

using Key = std::vector<uint32_t>;

uint32_t intern(std::map<Key, uint32_t>& ids, Key&& k) {
  const auto [it, fresh] = ids.emplace(std::move(k), static_cast<uint32_t>(ids.size()));
  return it->second;
}

constexpr std::array<GroupKind, 6> kRefined = {GroupKind::tp, GroupKind::cp, GroupKind::dp,
                                               GroupKind::pp, GroupKind::embd, GroupKind::mp};

}  // namespace

bool RankHardware::operator<(const RankHardware& o) const {
  return std::tie(slowdown, compute_model, nic_fraction, attention_work) <
         std::tie(o.slowdown, o.compute_model, o.nic_fraction, o.attention_work);
}

double packed_attention_work(const VariationConfig& v, int64_t seq_length, int64_t sequences, uint64_t key) {
  if (v.seq_length_distribution == SeqLengthDistribution::none || seq_length < 1) return 1.0;
  const double s2 = static_cast<double>(seq_length) * static_cast<double>(seq_length);
  uint64_t state = splitmix64(key);
  double total = 0;
  for (int64_t q = 0; q < sequences; ++q) {
    double sum = 0;
    for (int64_t left = seq_length; left > 0;) {
      state = splitmix64(state);
      const double u = unit_open(state);
      int64_t len = 0;
      if (v.seq_length_distribution == SeqLengthDistribution::exponential)
        len = static_cast<int64_t>(std::ceil(-static_cast<double>(v.document_mean_tokens) * std::log(u)));
      else
        len = v.document_min_tokens +
              static_cast<int64_t>(u * static_cast<double>(v.document_max_tokens - v.document_min_tokens + 1));
      len = std::clamp<int64_t>(len, 1, left);
      sum += static_cast<double>(len) * static_cast<double>(len);
      left -= len;
    }
    total += sum / s2;
  }
  return total / static_cast<double>(sequences);
}

std::vector<RankHardware> draw_hardware(const StepIR& ir, const VariationConfig& v, int64_t sample) {
  const int64_t world = ir.layout.world();
  const int64_t per_host = std::max<int64_t>(1, ir.scenario.cluster.devices_per_node);
  std::vector<RankHardware> hw(static_cast<size_t>(world));
  const uint64_t seed = splitmix64(static_cast<uint64_t>(v.seed) + static_cast<uint64_t>(sample));
  // Packed documents: per data-parallel replica and micro-batch, one draw.
  std::vector<std::vector<double>> work_of_replica;
  if (v.seq_length_distribution != SeqLengthDistribution::none) {
    const Scenario& sc = ir.scenario;
    work_of_replica.resize(static_cast<size_t>(ir.layout.dp()));
    for (int64_t d = 0; d < ir.layout.dp(); ++d)
      for (int64_t mb = 0; mb < sc.num_microbatches(); ++mb)
        work_of_replica[static_cast<size_t>(d)].push_back(packed_attention_work(
            v, sc.model.seq_length, sc.training.micro_batch_size,
            seed ^ splitmix64((static_cast<uint64_t>(d) << 32) + static_cast<uint64_t>(mb) + 0x5bd1e995ULL)));
  }
  for (int64_t r = 0; r < world; ++r) {
    RankHardware& h = hw[static_cast<size_t>(r)];
    if (!work_of_replica.empty()) h.attention_work = work_of_replica[static_cast<size_t>(ir.layout.coord(r).dp)];
    const double speed = v.gpu_speed_cv > 0 ? std::clamp(1.0 + v.gpu_speed_cv * normal(seed, r), 0.25, 4.0) : 1.0;
    for (int k = 0; k < static_cast<int>(OpKind::kCount); ++k)
      h.slowdown[static_cast<size_t>(k)] = is_comm(static_cast<OpKind>(k)) ? 1.0 : 1.0 / speed;
    const int64_t node = r / per_host;
    for (const Straggler& s : v.stragglers) {
      if (!((s.rank && *s.rank == r) || (s.node && *s.node == node))) continue;
      for (int k = 0; k < static_cast<int>(OpKind::kCount); ++k)
        if (s.slows(static_cast<OpKind>(k))) h.slowdown[static_cast<size_t>(k)] *= s.slowdown;
    }
    for (size_t g = 0; g < v.node_groups.size(); ++g)
      if (node >= v.node_groups[g].first_node && node <= v.node_groups[g].last_node)
        h.compute_model = static_cast<uint32_t>(g + 1);
    for (const LinkVariation& l : v.links)
      if (l.node == node) h.nic_fraction *= l.bandwidth_fraction;
  }
  return hw;
}

void pace_tensor_groups(const StepIR& ir, std::vector<RankHardware>& hw) {
  if (ir.layout.tp() <= 1) return;
  for (const std::vector<int64_t>& group : ir.layout.all_groups(GroupKind::tp)) {
    RankHardware slowest = hw.at(static_cast<size_t>(group.front()));
    for (int64_t r : group) {
      const RankHardware& h = hw.at(static_cast<size_t>(r));
      for (size_t k = 0; k < slowest.slowdown.size(); ++k) slowest.slowdown[k] = std::max(slowest.slowdown[k], h.slowdown[k]);
      slowest.nic_fraction = std::min(slowest.nic_fraction, h.nic_fraction);
    }
    for (int64_t r : group) {
      RankHardware& h = hw[static_cast<size_t>(r)];
      h.slowdown = slowest.slowdown;
      h.nic_fraction = slowest.nic_fraction;
    }
  }
}

RankClasses rank_classes(const StepIR& ir, const std::vector<RankHardware>& hw) {
  const Layout& L = ir.layout;
  const auto world = static_cast<size_t>(L.world());
  RankClasses out;
  // Initial colours: (stage, hardware).
  std::map<RankHardware, uint32_t> hw_ids;
  for (const RankHardware& h : hw) hw_ids.emplace(h, 0);
  uint32_t next = 0;
  for (auto& [h, id] : hw_ids) id = next++;
  std::vector<uint32_t> color(world);
  {
    std::map<Key, uint32_t> ids;
    for (size_t r = 0; r < world; ++r)
      color[r] = intern(ids, Key{static_cast<uint32_t>(L.stage_of(static_cast<int64_t>(r))), hw_ids.at(hw[r])});
  }
  std::array<std::vector<std::vector<int64_t>>, kRefined.size()> groups;
  for (size_t g = 0; g < kRefined.size(); ++g) groups[g] = L.all_groups(kRefined[g]);
  // Refine: a rank's new colour is its colour and, per kind, the multiset of its group's colours.
  size_t n_colors = 0;
  std::vector<std::array<uint32_t, kRefined.size()>> gtype(world);
  for (;;) {
    ++out.refinement_rounds;
    for (size_t g = 0; g < kRefined.size(); ++g) {
      std::map<Key, uint32_t> ids;
      for (size_t r = 0; r < world; ++r) gtype[r][g] = UINT32_MAX;  // no group of this kind
      for (const auto& grp : groups[g]) {
        Key k;
        k.reserve(grp.size());
        for (int64_t m : grp) k.push_back(color[static_cast<size_t>(m)]);
        std::sort(k.begin(), k.end());
        const uint32_t t = intern(ids, std::move(k));
        for (int64_t m : grp) gtype[static_cast<size_t>(m)][g] = t;
      }
    }
    std::map<Key, uint32_t> ids;
    std::vector<uint32_t> next_color(world);
    for (size_t r = 0; r < world; ++r) {
      Key k{color[r]};
      k.insert(k.end(), gtype[r].begin(), gtype[r].end());
      next_color[r] = intern(ids, std::move(k));
    }
    const size_t n = ids.size();
    color = std::move(next_color);
    if (n == n_colors) break;
    n_colors = n;
  }
  // Classes in ascending order of their lowest rank.
  std::vector<uint32_t> class_of_color(n_colors, UINT32_MAX);
  out.class_of.assign(world, 0);
  for (size_t r = 0; r < world; ++r) {
    uint32_t& c = class_of_color[color[r]];
    if (c == UINT32_MAX) {
      c = static_cast<uint32_t>(out.classes.size());
      RankClass rc;
      rc.rep = static_cast<int64_t>(r);
      rc.stage = L.stage_of(rc.rep);
      rc.hardware = hw[r];
      out.classes.push_back(std::move(rc));
    }
    out.class_of[r] = c;
    ++out.classes[c].ranks;
  }
  for (size_t g = 0; g < kRefined.size(); ++g) {
    const auto gk = static_cast<size_t>(kRefined[g]);
    std::map<uint32_t, int64_t> count;  // group type -> groups
    for (const auto& grp : groups[g]) ++count[gtype[static_cast<size_t>(grp.front())][g]];
    for (RankClass& rc : out.classes) {
      const uint32_t t = gtype[static_cast<size_t>(rc.rep)][g];
      rc.group_type[gk] = t;
      rc.groups_of_type[gk] = t == UINT32_MAX ? 0 : count[t];
      if (t == UINT32_MAX) continue;
      for (int64_t m : L.members(kRefined[g], rc.rep)) rc.peers[gk].push_back(out.class_of[static_cast<size_t>(m)]);
      std::sort(rc.peers[gk].begin(), rc.peers[gk].end());
      rc.peers[gk].erase(std::unique(rc.peers[gk].begin(), rc.peers[gk].end()), rc.peers[gk].end());
    }
  }
  return out;
}

}  // namespace paralab::sim
