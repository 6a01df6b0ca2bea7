// paralab simulate --chakra DIR (simulate_chakra.hpp).
#include "apps/simulate_chakra.hpp"

#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "chakra/chakra_import.hpp"
#include "ir/topology_loader.hpp"
#include "sim/replay/replay.hpp"

namespace paralab::cli {

namespace {

using sim::replay::NodeKind;

Topology topology_for(const Args& a, const sim::replay::TraceSet& set) {
  if (auto t = a.value("--topology")) {
    const SourceLoc where{"--topology", 0, 0};
    return load_topology(resolve_topology(*t, std::filesystem::current_path(), where, "--topology"));
  }
  if (!set.topology.empty() && std::filesystem::exists(set.topology)) return load_topology(set.topology);
  throw UsageError("--chakra DIR needs --topology NAME|FILE: the traces name no topology found on this machine" +
                   (set.topology.empty() ? std::string() : " ('" + set.topology + "')"));
}

void print_table(const sim::replay::TraceSet& set, const Topology& topo, const sim::replay::ReplayResult& r) {
  const auto& k = r.nodes_by_kind;
  std::printf("traces      %s: %zu ranks, %lld compute, %lld collective, %lld send, %lld recv, %lld other nodes; "
              "%zu process groups\n",
              set.source.c_str(), set.ranks.size(), (long long)k[0], (long long)k[1], (long long)k[2], (long long)k[3],
              (long long)k[4], set.groups.size());
  std::printf("topology    %s (%s)\n", topo.name.c_str(), topo.device.name.c_str());
  std::printf("step time   %.3f ms\n", r.step_us * 1e-3);
  std::printf("critical    %lld nodes: compute %.3f ms, communication %.3f ms, waiting %.3f ms\n",
              (long long)r.critical_nodes, r.critical_compute_us * 1e-3, r.critical_comm_us * 1e-3,
              r.critical_wait_us * 1e-3);
  std::printf("simulated   %lld events, %llu network calls, %llu flows\n\n", (long long)r.events,
              (unsigned long long)r.network.calls, (unsigned long long)r.network.flows);
  std::printf("%6s %7s | %10s %10s %10s %10s %10s | %7s\n", "rank", "nodes", "compute", "host ops", "comm", "exp. comm",
              "idle", "busy %");
  constexpr size_t kMaxRows = 64;
  for (size_t i = 0; i < r.ranks.size() && i < kMaxRows; ++i) {
    const auto& x = r.ranks[i];
    std::printf("%6lld %7lld | %7.3f ms %7.3f ms %7.3f ms %7.3f ms %7.3f ms | %6.1f%%\n", (long long)x.rank,
                (long long)x.nodes, x.compute_us * 1e-3, x.cpu_us * 1e-3, x.comm_us * 1e-3, x.exposed_comm_us * 1e-3,
                x.idle_us * 1e-3, r.step_us > 0 ? 100 * x.compute_us / r.step_us : 0);
  }
  if (r.ranks.size() > kMaxRows) std::printf("  ... and %zu more ranks (--json has them all)\n", r.ranks.size() - kMaxRows);
}

nlohmann::json to_json(const sim::replay::TraceSet& set, const Topology& topo, const sim::replay::ReplayResult& r) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& x : r.ranks)
    ranks.push_back({{"rank", x.rank}, {"nodes", x.nodes}, {"compute_s", x.compute_us * 1e-6},
                     {"host_ops_s", x.cpu_us * 1e-6}, {"comm_s", x.comm_us * 1e-6},
                     {"exposed_comm_s", x.exposed_comm_us * 1e-6}, {"idle_s", x.idle_us * 1e-6},
                     {"end_s", x.end_us * 1e-6}});
  nlohmann::json kinds = nlohmann::json::object();
  for (size_t i = 0; i < r.nodes_by_kind.size(); ++i)
    kinds[std::string(to_string(static_cast<NodeKind>(i)))] = r.nodes_by_kind[i];
  return {{"traces", set.source},
          {"world_size", set.ranks.size()},
          {"topology", topo.name},
          {"step_time_s", r.step_us * 1e-6},
          {"critical_path", {{"nodes", r.critical_nodes}, {"compute_s", r.critical_compute_us * 1e-6},
                             {"comm_s", r.critical_comm_us * 1e-6}, {"wait_s", r.critical_wait_us * 1e-6}}},
          {"nodes_by_kind", kinds},
          {"process_groups", set.groups.size()},
          {"network", {{"calls", r.network.calls}, {"flows", r.network.flows}}},
          {"events", r.events},
          {"ranks", ranks}};
}

}  // namespace

int simulate_chakra(const Args& a, const std::string& dir) {
  if (!a.positional.empty()) throw UsageError("--chakra DIR takes no SCENARIO (got '" + a.positional[0] + "')");
  for (const char* o : {"--trace", "--slow-rank", "--slowdown", "--growth", "--samples", "--tokens"})
    if (a.value(o) || a.flag(o)) throw UsageError(std::string(o) + " is not available with --chakra");
  const sim::replay::TraceSet set = chakra::read_chakra(dir);
  const Topology topo = topology_for(a, set);
  sim::replay::ReplayOptions opt;
  opt.record_nodes = false;
  const sim::replay::ReplayResult r = sim::replay::replay(set, topo, opt);
  if (a.flag("--json")) std::printf("%s\n", to_json(set, topo, r).dump(2).c_str());
  else print_table(set, topo, r);
  return 0;
}

}  // namespace paralab::cli
