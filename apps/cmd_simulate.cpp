// paralab simulate — predicted step time, throughput, MFU, bubble, exposed communication and
// memory of a scenario on its modeled hardware (sim/simulate.hpp), as a table, as JSON
// (--json, the fields of DESIGN.md) and as a Chrome/Perfetto trace (--trace FILE).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <cstdio>
#include <string>

#include "apps/cli.hpp"
#include "apps/commands.hpp"
#include "apps/simulate_chakra.hpp"
#include "apps/simulate_variation.hpp"
#include "ir/accounting.hpp"
#include "ir/scenario_loader.hpp"
#include "results/device_busy.hpp"
#include "results/goodput.hpp"
#include "results/result_io.hpp"
#include "sim/simulate.hpp"

namespace paralab::cli {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

const std::vector<OptionSpec> kOptions = {
    {"--trace", true, "write a Chrome trace-event file (open it in Perfetto / chrome://tracing)"},
    {"--slow-rank", true, "with --slowdown F: rank R's compute ops take F times as long (a straggler, [variation])"},
    {"--slowdown", true, "the straggler's slowdown factor F >= 1"},
    {"--growth", false, "with a straggler: its cost again at 2x and 4x the data-parallel replicas (weak scaling)"},
    {"--samples", true, "simulate N cluster draws of [variation]: step-time p50/p90/p99, mean MFU, slowest ranks"},
    {"--threads", true, "threads for --samples (default: every core; the output does not depend on it)"},
    {"--tokens", true, "also: time to train N tokens with failures, checkpoints and restarts ([reliability], docs/goodput.md)"},
    {"--chakra", true, "instead of SCENARIO: replay a folder of Chakra traces, every rank (docs/interop.md)"},
    {"--topology", true, "with --chakra: the hardware (a name in topologies/ or a file; default: the one the traces name)"},
    {"--help", false, "this help"},
};

std::string human(double x, const char* unit) {
  const char* prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  int i = 0;
  while (std::abs(x) >= 1000 && i < 6) x /= 1000, ++i;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g %s%s", x, prefixes[i], unit);
  return buf;
}

std::string seconds(double s) {
  char buf[64];
  if (s >= 1) std::snprintf(buf, sizeof buf, "%.3f s", s);
  else if (s >= 1e-3) std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  else std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
  return buf;
}

// Offload: the pinned host memory of the busiest rank, and of a node's ranks against the host's.
struct HostMemory {
  double per_rank = 0, per_node = 0, capacity = 0;
};
HostMemory host_memory(const sim::Simulation& sim, const StepIR& ir) {
  HostMemory h;
  for (const auto& m : sim.memory) h.per_rank = std::max(h.per_rank, m.host_resident);
  h.per_node = h.per_rank * static_cast<double>(ir.layout.devices_per_node());
  h.capacity = ir.scenario.topology.host.memory_gib * kGiB;
  return h;
}

void add_host_memory_json(nlohmann::json& j, const sim::Simulation& sim, const StepIR& ir) {
  const HostMemory h = host_memory(sim, ir);
  if (h.per_rank <= 0) return;
  j["host_memory_per_rank_gib"] = h.per_rank / kGiB;
  j["host_memory_per_node_gib"] = h.per_node / kGiB;
  j["host_memory_capacity_gib"] = h.capacity / kGiB;
  j["fits_in_host_memory"] = h.per_node <= h.capacity;
}

void print_host_memory(const sim::Simulation& sim, const StepIR& ir) {
  const HostMemory h = host_memory(sim, ir);
  std::printf("host mem    %.2f GiB pinned per rank, %.2f of %.0f GiB per node: %s\n", h.per_rank / kGiB, h.per_node / kGiB,
              h.capacity / kGiB, h.per_node <= h.capacity ? "fits" : "DOES NOT FIT");
}

void print_table(const sim::Simulation& sim, const StepIR& ir, double ir_s) {
  const StepResult& r = sim.result;
  const Scenario& sc = ir.scenario;
  const auto& p = sc.parallel;
  const double capacity = sc.topology.device.memory_gib * kGiB;
  std::printf("scenario    %s (%s on %lld x %s, topology %s)\n", sc.name.c_str(),
              sc.model.preset.empty() ? "custom model" : sc.model.preset.c_str(), (long long)r.world_size,
              sc.topology.device.name.c_str(), sc.topology.name.c_str());
  std::printf("layout      TP%lld PP%lld CP%lld DP%lld (v=%lld, %s, ZeRO-%lld, recompute %s, %s attention%s), "
              "%lld micro-batches of %lld\n",
              (long long)p.tensor, (long long)p.pipeline, (long long)p.context, (long long)p.data,
              (long long)p.virtual_pipeline_stages, std::string(to_string(p.schedule)).c_str(), (long long)p.zero_stage,
              std::string(to_string(sc.training.recompute)).c_str(),
              std::string(to_string(sc.training.attention)).c_str(), p.sequence_parallel ? ", SP" : "",
              (long long)sc.num_microbatches(), (long long)sc.training.micro_batch_size);
  std::printf("step time   %s\n", seconds(r.step_time_s).c_str());
  std::printf("throughput  %s tokens/s, %.4g model / %.4g hardware TFLOP/s per GPU, MFU %.1f %%\n",
              human(r.tokens_per_s, "").c_str(), r.model_tflops_per_gpu, r.hardware_tflops_per_gpu, 100 * r.mfu);
  const Breakdown& b = r.breakdown;
  double exposed = 0;
  for (double x : b.exposed_comm_s) exposed += x;
  std::printf("breakdown   compute %s, exposed communication %s, bubble %s (%.1f %% of the step), host %s",
              seconds(b.compute_s).c_str(), seconds(exposed).c_str(), seconds(b.bubble_s).c_str(),
              100 * r.bubble_fraction, seconds(b.host_s).c_str());
  const bool offload = sc.training.optimizer_cpu_offload || p.offload_param == OffloadParam::cpu;
  if (offload) std::printf(", exposed offload %s", seconds(b.offload_s).c_str());
  std::printf("\n");
  std::printf("exposed     ");
  for (int c = 0; c < kCommClasses; ++c)
    std::printf("%s %s%s", std::string(to_string(static_cast<CommClass>(c))).c_str(),
                seconds(b.exposed_comm_s[static_cast<size_t>(c)]).c_str(), c + 1 < kCommClasses ? ", " : "\n");
  std::printf("memory      peak %.2f GiB of %.0f GiB per device: %s\n", r.peak_memory_gib,
              sc.topology.device.memory_gib, r.fits_in_memory ? "fits" : "DOES NOT FIT");
  if (offload) print_host_memory(sim, ir);
  if (p.data_parallel_impl == DataParallelImpl::dataparallel && p.data > 1) {  // nn.DataParallel
    const DeviceBusy busy = dataparallel_busy(r, ir);
    std::printf("devices     nn.DataParallel: device 0 busy %.1f %% of the step, devices 1-%lld %.1f %% "
                "(no loss over the batch, no optimizer)\n",
                100 * busy.root_s / r.step_time_s, (long long)(p.data - 1), 100 * busy.replica_s / r.step_time_s);
  }
  if (r.oom_rank) {
    const StepGraph& g = ir.graph_for(*r.oom_rank);
    const sim::RankMemory* mem = nullptr;
    for (const auto& m : sim.memory)
      if (m.rank == *r.oom_rank) mem = &m;
    if (mem && mem->resident_total() > capacity)
      std::printf("            rank %lld (stage %lld): weights, gradients and optimizer state alone take %.2f GiB of %.0f GiB\n",
                  (long long)*r.oom_rank, (long long)mem->stage, mem->resident_total() / kGiB,
                  sc.topology.device.memory_gib);
    else if (mem)
      std::printf("            rank %lld (stage %lld) exceeds %.0f GiB at t = %s, when %s starts\n",
                  (long long)*r.oom_rank, (long long)mem->stage, sc.topology.device.memory_gib,
                  seconds(r.oom_time_us * 1e-6).c_str(),
                  mem->over_capacity_op < g.ops.size() ? g.ops[mem->over_capacity_op].full_name().c_str() : "?");
  }
  std::printf("simulated   %s: %s events (%s events/s), %s network calls; IR built in %s\n",
              seconds(r.wall_s).c_str(), human(static_cast<double>(r.events), "").c_str(),
              human(r.wall_s > 0 ? static_cast<double>(r.events) / r.wall_s : 0, "").c_str(),
              human(static_cast<double>(sim.network.calls), "").c_str(), seconds(ir_s).c_str());
  if (sim.per_rank)
    std::printf("per-rank    %lld classes of identical ranks simulated for %lld ranks ([variation], docs/simulator.md)\n\n",
                (long long)sim.simulated_ranks, (long long)r.world_size);
  else
    std::printf("\n");

  // Per stage: the representative rank's breakdown over the step and its memory peak (per-rank
  // mode: per class of identical ranks, the first kMaxRows of them).
  double t0 = 1e300, t1 = 0;
  for (const OpTiming& t : r.ops) {
    t0 = std::min(t0, t.start_us);
    t1 = std::max(t1, t.end_us);
  }
  std::printf("%5s %6s | %10s %10s %10s %10s %10s | %8s %8s %8s %8s %8s %8s | %10s %s\n", "stage", "rank", "compute",
              "exp. comm", "bubble", "host", "busy %", "weights", "grads", "optim", "activ", "buffers", "peak", "peak at",
              "fits");
  size_t begin = 0, rows = 0;
  constexpr size_t kMaxRows = 32;
  for (const auto& m : sim.memory) {
    if (++rows > kMaxRows) {
      std::printf("  ... and %zu more simulated ranks (classes of identical ranks; --trace has them all)\n",
                  sim.memory.size() - kMaxRows);
      break;
    }
    size_t end = begin;
    while (end < r.ops.size() && r.ops[end].rank == m.rank) ++end;
    const std::vector<OpTiming> mine(r.ops.begin() + static_cast<std::ptrdiff_t>(begin),
                                     r.ops.begin() + static_cast<std::ptrdiff_t>(end));
    begin = end;
    const Breakdown rb = rank_breakdown(ir, m.rank, mine, t0, t1);
    double ex = 0;
    for (double x : rb.exposed_comm_s) ex += x;
    const double act = m.at_peak[static_cast<size_t>(MemCategory::activations)];
    std::printf("%5lld %6lld | %10s %10s %10s %10s %9.1f%% | %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f | %10s %s\n",
                (long long)m.stage, (long long)m.rank, seconds(rb.compute_s).c_str(), seconds(ex).c_str(),
                seconds(rb.bubble_s).c_str(), seconds(rb.host_s).c_str(), r.step_time_s > 0 ? 100 * rb.compute_s / r.step_time_s : 0,
                m.resident[static_cast<size_t>(MemCategory::weights)] / kGiB,
                m.resident[static_cast<size_t>(MemCategory::grads)] / kGiB,
                m.resident[static_cast<size_t>(MemCategory::optimizer)] / kGiB, act / kGiB,
                (m.peak_transient - act) / kGiB, m.peak_total() / kGiB, seconds(m.peak_time_us * 1e-6).c_str(),
                m.peak_total() <= capacity ? "yes" : "NO");
  }
}

double parse_tokens(const std::string& v) {
  try {
    size_t used = 0;
    const double x = std::stod(v, &used);
    if (used == v.size() && x > 0 && std::isfinite(x)) return x;
  } catch (const std::exception&) {
  }
  throw UsageError("--tokens needs a positive number of tokens (e.g. 15e12), got '" + v + "'");
}

std::string duration(double s) {
  char buf[64];
  if (s >= 86400) std::snprintf(buf, sizeof buf, "%.1f days", s / 86400);
  else if (s >= 3600) std::snprintf(buf, sizeof buf, "%.2f h", s / 3600);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%.1f min", s / 60);
  else std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

void print_goodput(const Goodput& g) {
  std::printf("goodput     %s tokens: %s without failures, %s expected (goodput %.1f %%)\n", human(g.tokens, "").c_str(),
              duration(g.solve_s).c_str(), duration(g.wall_s).c_str(), 100 * g.goodput);
  std::printf("            %.0f interruptions (job MTBF %s); a %sB checkpoint every %s (%s; Young %s, Daly %s),\n",
              g.failures, duration(g.mtbf_s).c_str(), human(g.checkpoint_bytes, "").c_str(), duration(g.interval_s).c_str(),
              g.interval_optimal ? "Daly's optimum" : "as set", duration(g.interval_young_s).c_str(),
              duration(g.interval_daly_s).c_str());
  std::printf("            %s to write, %s to restart\n", duration(g.checkpoint_write_s).c_str(), duration(g.restart_s).c_str());
}

nlohmann::json goodput_json(const Goodput& g) {
  return {{"tokens", g.tokens},
          {"time_to_train_s", g.wall_s},
          {"failure_free_s", g.solve_s},
          {"goodput", g.goodput},
          {"interruptions", g.failures},
          {"mtbf_s", g.mtbf_s},
          {"checkpoint_bytes", g.checkpoint_bytes},
          {"checkpoint_write_s", g.checkpoint_write_s},
          {"restart_s", g.restart_s},
          {"checkpoint_interval_s", g.interval_s},
          {"checkpoint_interval_optimal", g.interval_optimal},
          {"checkpoint_interval_young_s", g.interval_young_s},
          {"checkpoint_interval_daly_s", g.interval_daly_s}};
}

}  // namespace

int run_simulate(int argc, char** argv) {
  const Args a = parse(argc, argv, 1, kOptions);
  if (a.flag("--help")) {
    std::printf("usage: paralab simulate SCENARIO [options]\n       paralab simulate --chakra DIR [--topology T] [--json]\n%s",
                options_help(kOptions).c_str());
    return 0;
  }
  if (auto dir = a.value("--chakra")) return simulate_chakra(a, *dir);
  if (a.positional.size() > 1) throw UsageError("one SCENARIO expected, got '" + a.positional[1] + "' too");
  check_outputs(a, {"--trace"});
  Scenario s = load_scenario(a.require_positional(0, "SCENARIO"), a.sets);
  add_slow_rank(a, s);
  const auto t0 = std::chrono::steady_clock::now();
  const StepIR ir = build_step_ir(s);
  const double ir_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const sim::Simulation sim = sim::simulate(ir);
  const VariationReport var = variation_report(a, ir);
  std::optional<Goodput> good;
  if (auto t = a.value("--tokens")) good = goodput(s, sim.result.step_time_s, ir.shape.total_params(), parse_tokens(*t));
  // Everything is computed before anything is written: an error leaves no output file.
  if (auto path = a.value("--trace")) write_file_atomic(*path, trace_json(sim.result, ir));
  if (a.flag("--json")) {
    nlohmann::json j = summary_json(sim.result);
    j["ir_build_s"] = ir_s;
    j["events_per_s"] = sim.result.wall_s > 0 ? static_cast<double>(sim.result.events) / sim.result.wall_s : 0.0;
    j["network"] = {{"calls", sim.network.calls}, {"flows", sim.network.flows}, {"patterns", sim.network.patterns}};
    if (good) j["goodput"] = goodput_json(*good);
    j["simulated_ranks"] = sim.simulated_ranks;
    add_host_memory_json(j, sim, ir);
    if (ir.scenario.parallel.data_parallel_impl == DataParallelImpl::dataparallel && ir.layout.dp() > 1) {
      const DeviceBusy busy = dataparallel_busy(sim.result, ir);
      j["dataparallel"] = {{"device0_busy_s", busy.root_s}, {"replica_busy_s", busy.replica_s}};
    }
    add_variation_json(j, var, sim.result.step_time_s);
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    print_table(sim, ir, ir_s);
    print_variation(var, ir, sim.result.step_time_s);
    if (good) print_goodput(*good);
  }
  return 0;
}

}  // namespace paralab::cli
