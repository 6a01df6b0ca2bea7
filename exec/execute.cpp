// paralab exec — the execute driver: plan, check, run, gather.
#include "exec/execute.hpp"

#include "ir/enum_names.hpp"

#include <sys/resource.h>

#include <chrono>
#include <fstream>
#include <limits>
#include <sstream>

#include "exec/backends.hpp"
#include "exec/error.hpp"
#include "ir/accounting.hpp"
#include "ir/enum_names.hpp"
#include "results/result_io.hpp"

namespace paralab::exec {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

double mem_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024.0;
  return 0;  // unknown
}

double rss_peak_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024.0;  // Linux: kilobytes
}

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / kGiB);
  return buf;
}

nlohmann::json memory_json(const MemoryStats& m) {
  return {{"resident", m.resident},
          {"at_peak", m.at_peak},
          {"peak_transient", m.peak_transient},
          {"peak_time_us", m.peak_time_us},
          {"peak_op", m.peak_op}};
}

MemoryStats memory_from_json(const nlohmann::json& j) {
  MemoryStats m;
  m.resident = j.at("resident").get<std::array<double, kMemCategories>>();
  m.at_peak = j.at("at_peak").get<std::array<double, kMemCategories>>();
  m.peak_transient = j.at("peak_transient").get<double>();
  m.peak_time_us = j.at("peak_time_us").get<double>();
  m.peak_op = j.at("peak_op").get<OpId>();
  return m;
}

}  // namespace

// Offload (docs/offload.md) runs on the cuda backend, for AdamW without fp16 loss scaling (the
// host step has no loss-scale state); the cpu backend has no device memory to offload from.
static void refuse_unsupported_offload(const StepIR& ir, const Backend& backend, int64_t rank) {
  const Scenario& s = ir.scenario;
  if (!s.training.optimizer_cpu_offload && s.parallel.offload_param == OffloadParam::none) return;
  if (backend.name() != "cuda")
    throw ExecError(rank, "optimizer_cpu_offload / offload_param move state from device to host memory; the " +
                              std::string(backend.name()) + " backend runs on the host already and does not execute "
                              "them: simulate the scenario, or execute it with --backend cuda");
  if (s.training.optimizer != Optimizer::adam || s.training.precision == Precision::fp16)
    throw ExecError(rank, "the cuda backend's host optimizer step is AdamW without fp16 loss scaling; this scenario "
                          "has optimizer " + std::string(to_string(s.training.optimizer)) + " and precision " +
                          std::string(to_string(s.training.precision)) + ": simulate it, or use adam with bf16");
}

double planned_peak_bytes(const StepIR& ir, int64_t rank) {
  return replay_memory(ir.graph_for(rank)).peak_total();
}

ExecuteOutcome execute(const StepIR& ir, Transport& world, const ExecuteOptions& opts) {
  const auto t_start = std::chrono::steady_clock::now();
  const int64_t rank = world.rank();
  if (world.size() != ir.layout.world())
    throw ExecError(rank, "the scenario's layout has " + std::to_string(ir.layout.world()) + " ranks but " +
                              std::to_string(world.size()) + " processes were launched");

  // Block-scaled formats are simulated only: they need Blackwell's block-scaled tensor-core
  // GEMMs (compute capability 10.0), which neither backend runs.
  const Precision prec = ir.scenario.training.precision;
  if (prec == Precision::mxfp8 || prec == Precision::nvfp4)
    throw ExecError(rank, "precision " + std::string(to_string(prec)) + " is simulated, not executed: it needs "
                              "block-scaled tensor-core GEMMs (Blackwell, compute capability 10.0), which neither "
                              "the cpu nor the cuda backend runs; execute with precision fp8 or bf16");
  if (opts.slow_rank >= world.size() || opts.slow_rank < -1)
    throw ExecError(rank, "the slowed rank must be one of 0 .. " + std::to_string(world.size() - 1) + ", got " +
                              std::to_string(opts.slow_rank));
  if (!(opts.slowdown >= 1.0 && opts.slowdown <= kMaxSlowdown))
    throw ExecError(rank, "the slowdown must be in [1, " + std::to_string(static_cast<int>(kMaxSlowdown)) + "], got " +
                              std::to_string(opts.slowdown));
  using clock = std::chrono::steady_clock;
  auto secs = [](clock::time_point a, clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  std::unique_ptr<Backend> backend = make_backend(opts.backend, ir, rank);
  refuse_unsupported_offload(ir, *backend, rank);
  if (ir.scenario.parallel.data_parallel_impl == DataParallelImpl::dataparallel)
    throw ExecError(rank, "data_parallel_impl = \"dataparallel\" (PyTorch's nn.DataParallel) is simulated, not executed: "
                          "paralab executes the data parallelism it recommends, \"ddp\" (docs/dataparallel.md)");
  // Memory (host backends): the IR's peak for every rank on this host must fit in what the host
  // has free. Every rank agrees on the verdict.
  if (backend->name() == "cpu") {
    const double need = planned_peak_bytes(ir, rank) * world.local_size();
    const double avail = mem_available_bytes();
    int64_t bad = avail > 0 && need > 0.9 * avail ? 1 : 0;
    world.all_reduce(&bad, 1, ReduceOp::max);
    if (bad)
      throw ExecError(rank, "the step needs about " + gib(planned_peak_bytes(ir, rank)) + " per rank (" +
                                std::to_string(world.local_size()) + " ranks on this host: " + gib(need) +
                                ") but the host has " + gib(avail) + " available (or another rank's host is short); "
                                "use a smaller model, batch or sequence");
  }

  const RankPlan plan = plan_rank(ir, rank, opts.verify);
  backend->setup(plan, world);
  const std::vector<GroupComm*> comms = backend->comms();
  check_collective_sequences(plan, comms);

  VerifyReport report;
  if (opts.verify) check_collectives(*backend, plan, comms, opts.watchdog_s, report);
  std::unique_ptr<OpChecker> checker;
  RuntimeOptions ro;
  ro.watchdog_s = opts.watchdog_s;
  ro.fault = opts.fault;
  if (rank == opts.slow_rank) ro.slowdown = plan_slowdown(*plan.graph, opts.slowdown);
  if (opts.verify) {
    checker = std::make_unique<OpChecker>(plan, *backend);
    ro.observer = checker.get();
  }

  StepRun run;
  int64_t warmup_steps = 0;
  int core_turns = 0;
  bool core_turns_batch = false;
  std::vector<double> first_us, last_us;  // per step: this rank's earliest op start, latest op end
  // The measured steps' op timings: every step after the warm-up with keep_steps, else the last.
  std::vector<std::vector<OpTiming>> kept;
  clock::time_point t_ready, t_warm_end, t_steps_end;
  {
    Runtime rt(plan, *backend, world, ro);
    rt.initialize();
    t_ready = clock::now();
    core_turns = rt.core_turns();
    auto run_one = [&](int64_t step) {
      run = rt.run_step(step);
      double a = std::numeric_limits<double>::infinity(), b = -a;  // no op: an empty window
      for (const OpTiming& t : run.ops) {
        a = std::min(a, t.start_us);
        b = std::max(b, t.end_us);
      }
      first_us.push_back(a);
      last_us.push_back(b);
    };
    int64_t step = 0;
    if (opts.warmup_s > 0) {
      const auto t_warm = std::chrono::steady_clock::now();
      for (int64_t more = 1; more;) {
        run_one(++step);
        // Rank 0's clock decides for everyone, so every rank runs the same steps.
        more = world.rank() == 0 &&
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t_warm).count() < opts.warmup_s;
        world.all_reduce(&more, 1, ReduceOp::max);
      }
      warmup_steps = step;
    }
    t_warm_end = clock::now();
    for (int64_t i = 0; i < std::max<int64_t>(opts.steps, 1); ++i) {
      run_one(++step);
      if (opts.keep_steps) kept.push_back(std::move(run.ops));
      if (opts.measure_s > 0 && i + 1 < opts.steps) {
        // Rank 0's clock decides for everyone, as for the warm-up.
        int64_t more = world.rank() == 0 && std::chrono::duration<double>(clock::now() - t_warm_end).count() < opts.measure_s;
        world.all_reduce(&more, 1, ReduceOp::max);
        if (!more) break;
      }
    }
    t_steps_end = clock::now();
    if (!opts.keep_steps) kept.push_back(std::move(run.ops));
    core_turns_batch = rt.batch_scheduling();
    if (opts.verify) {
      report.merge(checker->report());
      check_after_step(rt, *backend, plan, comms, report);
    }
  }

  // Everything every rank measured goes to rank 0.
  nlohmann::json blob;
  blob["rank"] = rank;
  blob["stage"] = plan.graph->stage;
  // An op's timing as three numbers: op id, start, end (us on rank 0's clock).
  auto flat = [](const std::vector<OpTiming>& timings) {
    std::vector<double> v;
    v.reserve(timings.size() * 3);
    for (const OpTiming& t : timings) {
      v.push_back(static_cast<double>(t.op));
      v.push_back(t.start_us);
      v.push_back(t.end_us);
    }
    return v;
  };
  blob["ops"] = nlohmann::json::array();  // per measured step
  for (const auto& k : kept) blob["ops"].push_back(flat(k));
  blob["step_first_us"] = first_us;
  blob["step_last_us"] = last_us;
  blob["memory"] = memory_json(run.memory);
  blob["rss"] = rss_peak_bytes();
  blob["ops_run"] = run.ops_run;
  blob["extra_runs"] = run.extra_runs;
  blob["device"] = backend->device_stats();
  // The loss is computed identically on every tensor-parallel rank: count it once.
  blob["loss_sum"] = plan.coord.tp == 0 ? run.loss_sum : 0.0;
  blob["loss_tokens"] = plan.coord.tp == 0 ? run.loss_tokens : 0;
  if (opts.verify) blob["verify"] = report.to_json();
  std::vector<uint8_t> cbor = nlohmann::json::to_cbor(blob);
  const std::vector<std::string> all = world.gather_to_root(std::string(cbor.begin(), cbor.end()));

  ExecuteOutcome out;
  out.verified = opts.verify;
  int64_t vfail = opts.verify && report.failed() > 0 ? 1 : 0;
  world.all_reduce(&vfail, 1, ReduceOp::max);
  out.verify_failed = vfail != 0;
  if (rank != 0) return out;

  out.root = true;
  StepResult& r = out.result;
  r.kind = "measured";
  r.backend = opts.backend;
  double loss_sum = 0;
  int64_t loss_tokens = 0;
  std::vector<double> first(first_us.size(), std::numeric_limits<double>::infinity());
  std::vector<double> last(first_us.size(), -std::numeric_limits<double>::infinity());
  std::vector<std::vector<OpTiming>> step_ops(kept.size());  // every rank's, per measured step
  for (const std::string& s : all) {
    const nlohmann::json j = nlohmann::json::from_cbor(std::vector<uint8_t>(s.begin(), s.end()));
    const auto f = j.at("step_first_us").get<std::vector<double>>();
    const auto l = j.at("step_last_us").get<std::vector<double>>();
    for (size_t i = 0; i < first.size() && i < f.size() && i < l.size(); ++i) {
      first[i] = std::min(first[i], f[i]);
      last[i] = std::max(last[i], l[i]);
    }
    RankReport rr;
    rr.rank = j.at("rank").get<int64_t>();
    rr.stage = j.at("stage").get<int64_t>();
    rr.memory = memory_from_json(j.at("memory"));
    rr.rss_peak_bytes = j.at("rss").get<double>();
    rr.ops_run = j.at("ops_run").get<int64_t>();
    rr.extra_runs = j.at("extra_runs").get<int64_t>();
    if (j.contains("device")) rr.device = j.at("device").get<std::map<std::string, double>>();
    const auto& steps = j.at("ops");
    if (steps.size() != step_ops.size())
      throw ExecError(rr.rank, "measured " + std::to_string(steps.size()) + " steps, rank 0 " + std::to_string(step_ops.size()));
    for (size_t k = 0; k < steps.size(); ++k) {
      const auto o = steps[k].get<std::vector<double>>();
      for (size_t i = 0; i + 2 < o.size(); i += 3) step_ops[k].push_back({rr.rank, static_cast<OpId>(o[i]), o[i + 1], o[i + 2]});
    }
    RankStats st;
    st.rank = rr.rank;
    st.stage = rr.stage;
    st.peak_memory_bytes = rr.memory.peak_total();
    st.peak_time_us = rr.memory.peak_time_us;
    st.peak_op = rr.memory.peak_op;
    r.ranks.push_back(st);
    r.events += rr.ops_run;
    loss_sum += j.at("loss_sum").get<double>();
    loss_tokens += j.at("loss_tokens").get<int64_t>();
    if (j.contains("verify")) out.verify.merge(VerifyReport::from_json(j["verify"]));
    out.ranks.push_back(rr);
  }
  out.warmup_steps = warmup_steps;
  out.slow_rank = opts.slow_rank;
  out.slowdown = opts.slow_rank >= 0 ? opts.slowdown : 1.0;
  out.core_turns = core_turns;
  out.core_turns_batch = core_turns_batch;
  out.doorbells = world.doorbells();
  out.device = backend->device_identity();
  // A CPU host's scenario run on a GPU: its topology's peak is the host's, not the device's.
  const double device_peak = measured_mfu_peak_tflops(out.device, ir.scenario.topology.device.kind,
                                                      gemm_math(ir.scenario.training.precision));
  out.loss = loss_tokens > 0 ? loss_sum / static_cast<double>(loss_tokens) : 0.0;
  for (size_t i = 0; i < first.size(); ++i) out.step_times_s.push_back(last[i] > first[i] ? (last[i] - first[i]) * 1e-6 : 0.0);
  // The measured steps share everything but their ops; the last is the result.
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  for (size_t k = 0; k < step_ops.size(); ++k) {
    StepResult sk = r;
    sk.ops = std::move(step_ops[k]);
    finalize(sk, ir);
    if (device_peak > 0) sk.mfu = sk.model_tflops_per_gpu / device_peak;
    sk.wall_s = wall_s;
    if (opts.keep_steps) out.steps.push_back(sk);
    if (k + 1 == step_ops.size()) r = std::move(sk);
  }
  out.setup_s = secs(t_start, t_ready);
  out.warmup_s = secs(t_ready, t_warm_end);
  out.steps_s = secs(t_warm_end, t_steps_end);
  out.gather_s = secs(t_steps_end, clock::now());
  return out;
}

nlohmann::json outcome_json(const ExecuteOutcome& out) {
  nlohmann::json j = summary_json(out.result);
  j["loss"] = out.loss;
  j["step_times_s"] = out.step_times_s;
  j["warmup_steps"] = out.warmup_steps;
  j["phases_s"] = {{"setup", out.setup_s}, {"warmup", out.warmup_s}, {"steps", out.steps_s}, {"gather", out.gather_s}};
  j["core_turns"] = out.core_turns;
  j["core_turns_batch"] = out.core_turns_batch;
  j["doorbells"] = out.doorbells;
  if (out.slow_rank >= 0) j["slowdown"] = {{"rank", out.slow_rank}, {"factor", out.slowdown}};
  if (out.device) {
    const DeviceIdentity& d = *out.device;
    j["gpu"] = {{"name", d.name},         {"compute_capability", d.compute_capability()},
                {"sm_count", d.sm_count}, {"sm_clock_mhz", d.sm_clock_mhz},
                {"memory_gib", d.memory_gib}, {"mem_bw_gbps", d.mem_bw_gbps},
                {"l2_mib", d.l2_mib}};
  }
  for (auto& rj : j["ranks"]) {
    for (const RankReport& rr : out.ranks) {
      if (rr.rank != rj["rank"].get<int64_t>()) continue;
      nlohmann::json res, peak;
      for (int c = 0; c < kMemCategories; ++c) {
        const std::string name(to_string(static_cast<MemCategory>(c)));
        res[name] = rr.memory.resident[static_cast<size_t>(c)] / kGiB;
        peak[name] = rr.memory.at_peak[static_cast<size_t>(c)] / kGiB;
      }
      rj["resident_gib"] = res;
      rj["transient_at_peak_gib"] = peak;
      rj["rss_peak_gib"] = rr.rss_peak_bytes / kGiB;
      rj["ops_run"] = rr.ops_run;
      if (out.slow_rank >= 0) rj["extra_runs"] = rr.extra_runs;
      if (!rr.device.empty()) rj["device"] = rr.device;
    }
  }
  if (out.verified) {
    j["verify"] = out.verify.to_json();
    j["verify"]["passed"] = !out.verify_failed;
  }
  return j;
}

}  // namespace paralab::exec
