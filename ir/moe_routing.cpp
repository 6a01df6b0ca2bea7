// paralab — routing models: per-expert token shares and the EP ranks' loads (ir/moe_routing.hpp).
#include "ir/moe_routing.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include "ir/error.hpp"

namespace paralab {

namespace {

// A seeded permutation of 0..n-1 (Fisher-Yates on mt19937_64, reduced by modulo: the same on
// every platform, unlike std::shuffle).
std::vector<int64_t> permutation(int64_t n, int64_t seed) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i;
  std::mt19937_64 g(static_cast<uint64_t>(seed));
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[static_cast<size_t>(i)], p[g() % static_cast<uint64_t>(i + 1)]);
  return p;
}

// Caps every share at `cap` and spreads the excess over the uncapped shares in proportion
// (water-filling); the sum stays 1. Needs cap * n >= 1.
void cap_shares(std::vector<double>& w, double cap) {
  std::vector<bool> capped(w.size(), false);
  for (size_t round = 0; round <= w.size(); ++round) {
    double excess = 0, free = 0;
    for (size_t i = 0; i < w.size(); ++i)
      if (!capped[i] && w[i] > cap) {
        excess += w[i] - cap;
        w[i] = cap;
        capped[i] = true;
      }
    for (size_t i = 0; i < w.size(); ++i)
      if (!capped[i]) free += w[i];
    if (excess <= 0 || free <= 0) return;
    for (size_t i = 0; i < w.size(); ++i)
      if (!capped[i]) w[i] += excess * w[i] / free;
  }
}

std::vector<double> normalized(std::vector<double> w) {
  double sum = 0;
  for (double x : w) sum += x;
  for (double& x : w) x = sum > 0 ? x / sum : 1.0 / static_cast<double>(w.size());
  return w;
}

}  // namespace

std::vector<double> expert_shares(const MoEConfig& e, int64_t moe_layer) {
  const int64_t n = e.num_experts;
  std::vector<double> w(static_cast<size_t>(n), 1.0 / static_cast<double>(n));
  if (e.moe_routing == RoutingModel::measured) {
    const auto& rows = e.measured_counts;
    if (rows.empty()) return w;
    return normalized(rows.size() == 1 ? rows[0] : rows[static_cast<size_t>(moe_layer) % rows.size()]);
  }
  if (e.moe_routing == RoutingModel::balanced) return w;
  const std::vector<int64_t> order = permutation(n, e.moe_routing_seed);  // order[j]: the j-th hottest
  if (e.moe_routing == RoutingModel::zipf) {
    for (int64_t j = 0; j < n; ++j)
      w[static_cast<size_t>(order[static_cast<size_t>(j)])] = 1.0 / std::pow(static_cast<double>(j + 1), e.moe_routing_zipf_exponent);
    w = normalized(w);
  } else {  // hot_expert
    const double hot = e.moe_routing_hot_expert_share;
    for (double& x : w) x = n > 1 ? (1 - hot) / static_cast<double>(n - 1) : 1;
    w[static_cast<size_t>(order[0])] = n > 1 ? hot : 1;
  }
  cap_shares(w, 1.0 / static_cast<double>(e.moe_router_topk));
  return w;
}

RoutingLoad routing_load(const std::vector<double>& shares, int64_t ep) {
  RoutingLoad out;
  const int64_t n = static_cast<int64_t>(shares.size()), per = n / std::max<int64_t>(ep, 1);
  if (n == 0 || per == 0) return out;
  double busiest = 0;
  for (int64_t r = 0; r < ep; ++r) {
    double load = 0;
    for (int64_t j = r * per; j < (r + 1) * per; ++j) load += shares[static_cast<size_t>(j)];
    if (load > busiest + 1e-15) busiest = load, out.busiest_ep_rank = r;
  }
  out.ep_rank_max_over_mean = busiest * static_cast<double>(ep);
  out.expert_max_over_mean = *std::max_element(shares.begin(), shares.end()) * static_cast<double>(n);
  return out;
}

std::vector<std::vector<double>> read_routing_counts(const std::filesystem::path& file, int64_t num_experts,
                                                     int64_t moe_layers, const std::string& key) {
  std::ifstream in(file);
  const std::string allowed = "rows of " + std::to_string(num_experts) + " non-negative token counts, one row or " +
                              std::to_string(moe_layers) + " (one per MoE layer)";
  if (!in) throw ConfigError(SourceLoc{file.string(), 0, 0}, key, file.string(), "cannot be read", allowed);
  std::vector<std::vector<double>> rows;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::vector<double> row;
    std::stringstream ss(line);
    std::string cell;
    const SourceLoc at{file.string(), number, 0};
    while (std::getline(ss, cell, ',')) {
      size_t used = 0;
      double v = -1;
      try {
        v = std::stod(cell, &used);
      } catch (const std::exception&) {
      }
      if (cell.find_first_not_of(" \t\r", used) != std::string::npos || !(v >= 0) || !std::isfinite(v))
        throw ConfigError(at, key, cell, "is not a non-negative token count", allowed);
      row.push_back(v);
    }
    if (static_cast<int64_t>(row.size()) != num_experts)
      throw ConfigError(at, key, std::to_string(row.size()) + " counts", "a row needs one count per expert", allowed);
    double sum = 0;
    for (double v : row) sum += v;
    if (sum <= 0) throw ConfigError(at, key, "all zero", "a row routes no token", allowed);
    rows.push_back(std::move(row));
  }
  if (rows.size() != 1 && static_cast<int64_t>(rows.size()) != moe_layers)
    throw ConfigError(SourceLoc{file.string(), 0, 0}, key, std::to_string(rows.size()) + " rows",
                      "the file has neither one row nor one per MoE layer", allowed);
  return rows;
}

}  // namespace paralab
