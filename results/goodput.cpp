// paralab — goodput over a training run (goodput.hpp).
#include "results/goodput.hpp"

#include <cmath>

#include "ir/error.hpp"

namespace paralab {

double checkpoint_bytes(const Scenario& s, int64_t parameters) {
  const double weight = static_cast<double>(bytes_of(activation_dtype(s.training.precision)));
  const double master = is_mixed(s.training.precision) ? 4.0 : 0.0;
  const double optim = s.training.optimizer == Optimizer::adam ? 8.0 : 4.0;
  return static_cast<double>(parameters) * (weight + master + optim);
}

double daly_wall_s(double solve_s, double tau_s, double delta_s, double restart_s, double mtbf_s) {
  return mtbf_s * std::exp(restart_s / mtbf_s) * std::expm1((tau_s + delta_s) / mtbf_s) * solve_s / tau_s;
}

double young_interval_s(double delta_s, double mtbf_s) { return std::sqrt(2.0 * delta_s * mtbf_s); }

double daly_interval_s(double delta_s, double mtbf_s) {
  if (delta_s >= 2.0 * mtbf_s) return mtbf_s;
  const double x = delta_s / (2.0 * mtbf_s);
  return young_interval_s(delta_s, mtbf_s) * (1.0 + std::sqrt(x) / 3.0 + x / 9.0) - delta_s;
}

Goodput goodput(const Scenario& s, double step_s, int64_t parameters, double tokens) {
  const ReliabilityConfig& r = s.reliability;
  const double per_day = r.gpu_failures_per_day * static_cast<double>(s.world_size()) +
                         r.node_failures_per_day * static_cast<double>(s.cluster.nodes);
  if (!(per_day > 0))
    throw ConfigError(s.provenance.at("reliability.node_failures_per_day"), "reliability.node_failures_per_day",
                      "0", "goodput needs a failure rate", "gpu_failures_per_day or node_failures_per_day > 0");
  Goodput g;
  g.tokens = tokens;
  g.solve_s = tokens / static_cast<double>(s.tokens_per_step()) * step_s;
  g.mtbf_s = 86400.0 / per_day;
  g.checkpoint_bytes = checkpoint_bytes(s, parameters);
  g.checkpoint_write_s = g.checkpoint_bytes / (r.checkpoint_write_gbps * 1e9);
  g.restart_s = r.restart_s + g.checkpoint_bytes / (r.checkpoint_read_gbps * 1e9);
  g.interval_young_s = young_interval_s(g.checkpoint_write_s, g.mtbf_s);
  g.interval_daly_s = daly_interval_s(g.checkpoint_write_s, g.mtbf_s);
  g.interval_optimal = !(r.checkpoint_interval_s > 0);
  g.interval_s = g.interval_optimal ? g.interval_daly_s : r.checkpoint_interval_s;
  g.wall_s = g.solve_s > 0 ? daly_wall_s(g.solve_s, g.interval_s, g.checkpoint_write_s, g.restart_s, g.mtbf_s) : 0.0;
  g.goodput = g.wall_s > 0 ? g.solve_s / g.wall_s : 1.0;
  g.failures = g.wall_s / g.mtbf_s;
  return g;
}

}  // namespace paralab
