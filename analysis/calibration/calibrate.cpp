// paralab — the calibration job: measurements on every rank, pooled and fitted on rank 0, and
// the calibrated topology (docs/calibration.md).
#include "analysis/calibrate.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "analysis/arrival_model.hpp"
#include "analysis/in_situ.hpp"
#include "analysis/in_situ_run.hpp"
#include "analysis/run_noise.hpp"
#include "analysis/temp_dir.hpp"
#include "exec/backends.hpp"
#include "exec/execute.hpp"
#include "exec/plan.hpp"
#include "ir/enum_names.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/step_ir.hpp"
#include "ir/topology_loader.hpp"
#include "sim/engine/core_share.hpp"

namespace paralab::calib {

namespace {

using clock_type = std::chrono::steady_clock;

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// One replay job: a rank of a scenario's IR.
struct Job {
  const StepIR* ir = nullptr;
  int64_t rank = 0;
  std::string origin;
};

// The one-layer models of the sweep (docs/calibration.md, "Sweep"): hidden size, heads, FFN,
// sequence, micro-batch, vocabulary, precision, preset.
struct SweepPoint {
  int64_t hidden, heads, ffn, seq, mb, vocab;
  const char* precision;
  const char* preset;
};

std::vector<SweepPoint> sweep_points(bool quick) {
  if (quick)
    return {{64, 4, 256, 64, 1, 512, "fp32", "tiny"},
            {128, 4, 512, 128, 1, 1024, "fp32", "tiny"},
            {64, 4, 192, 64, 1, 512, "bf16", "tiny-llama"}};
  return {
      {64, 4, 256, 64, 1, 512, "fp32", "tiny"},
      {128, 4, 512, 128, 1, 1024, "fp32", "tiny"},
      {256, 4, 1024, 128, 2, 2048, "fp32", "tiny"},
      {256, 4, 512, 512, 1, 4096, "fp32", "tiny"},
      {512, 8, 1024, 256, 1, 4096, "fp32", "tiny"},
      {512, 8, 2048, 128, 2, 8192, "fp32", "tiny"},
      {1024, 16, 2048, 128, 1, 8192, "fp32", "tiny"},
      {128, 4, 384, 128, 2, 1024, "fp32", "tiny-llama"},
      {64, 4, 192, 64, 1, 512, "bf16", "tiny-llama"},
      {256, 4, 768, 128, 2, 2048, "bf16", "tiny-llama"},
      {512, 8, 1024, 256, 1, 4096, "bf16", "tiny"},
  };
}

std::string scenario_text(const std::string& preset, const std::filesystem::path& topology, int64_t tensor,
                          int64_t data, int64_t devices) {
  std::string t = topology.string();
  std::string esc;
  for (char c : t) {
    if (c == '"' || c == '\\') esc += '\\';
    esc += c;
  }
  return "[model]\npreset = \"" + preset + "\"\nnum_layers = 1\n[training]\nglobal_batch_size = " +
         std::to_string(data) + "\nmicro_batch_size = 1\nprecision = \"fp32\"\n[parallel]\ntensor = " +
         std::to_string(tensor) + "\npipeline = 1\ndata = " + std::to_string(data) +
         "\n[cluster]\ntopology = \"" + esc + "\"\nnodes = 1\ndevices_per_node = " + std::to_string(devices) + "\n";
}

std::filesystem::path write_text(const std::filesystem::path& p, const std::string& s) {
  std::ofstream(p) << s;
  return p;
}

// Sizes of the communication sweep: 64 B .. 16 MiB in steps of 4x (quick: 256 B .. 1 MiB, 16x).
std::vector<int64_t> comm_sizes(bool quick) {
  std::vector<int64_t> out;
  if (quick) {
    for (int64_t s = 256; s <= (int64_t{1} << 20); s *= 16) out.push_back(s);
  } else {
    for (int64_t s = 64; s <= (int64_t{16} << 20); s *= 4) out.push_back(s);
  }
  return out;
}

// Streaming copy bandwidth one rank gets with every rank copying at once (GB/s).
double copy_bandwidth_gbps(exec::Transport& world) {
  const size_t n = size_t{64} << 20;
  std::vector<char> a(n, 1), b(n, 2);
  std::vector<double> gbps;
  for (int r = 0; r < 6; ++r) {
    world.barrier();
    const auto t0 = clock_type::now();
    std::memcpy(b.data(), a.data(), n);
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    if (r > 0) gbps.push_back(2.0 * static_cast<double>(n) / s * 1e-9);  // read + write
    std::swap(a, b);
  }
  std::sort(gbps.begin(), gbps.end());
  return gbps[gbps.size() / 2];
}

nlohmann::json samples_json(const std::map<OpKey, OpSamples>& compute, const std::vector<CommPoint>& comm, double copy) {
  nlohmann::json j;
  nlohmann::json c = nlohmann::json::array();
  for (const auto& [k, s] : compute)
    c.push_back({{"kind", static_cast<int>(k.kind)}, {"m", k.m}, {"n", k.n}, {"k", k.k}, {"batch", k.batch},
                 {"math", static_cast<int>(k.math)}, {"bytes", k.bytes}, {"flops", s.flops}, {"op_bytes", s.bytes},
                 {"exec_flops", s.exec_flops}, {"origin", s.origin}, {"us", s.us}});
  j["compute"] = c;
  nlohmann::json m = nlohmann::json::array();
  for (const CommPoint& p : comm)
    m.push_back({{"pattern", static_cast<int>(p.pattern)}, {"dtype", static_cast<int>(p.dtype)}, {"group", p.group},
                 {"bytes", p.bytes}, {"us", p.us}});
  j["comm"] = m;
  j["copy_gbps"] = copy;
  return j;
}

}  // namespace

// ---- The job -------------------------------------------------------------------------------------

CalibrationResult run_calibration(exec::Transport& world, const CalibrateOptions& opts) {
  const auto t_start = clock_type::now();
  const int rank = world.rank(), N = world.size();
  CalibrationResult res;
  res.backend = opts.backend;
  res.ranks = N;
  res.reps = opts.reps;
  res.started_utc = utc_now();
  res.host = host_info(world.node_cores());  // as the executor's core turns count them
  // With more ranks than cores every rank's threads share the host's cores: a replayed op's wall
  // time is then how long the others held its core as much as its own work, which the simulator
  // models itself (sim/engine/core_share.hpp), so replays are timed by thread CPU time. The
  // executed scenario's ops are not replayed: under core turns an executed op's time starts
  // when its thread may run, and is what it takes beside the others (docs/calibration.md,
  // "Shared cores").
  res.compute_cpu_time = opts.backend == "cpu" && N > res.host.cores;

  // The scenarios measured exactly, and the base topology.
  // A scenario of this job's size is executed for real (5. below) and its compute ops are
  // measured there; the others are replayed (1.).
  std::deque<StepIR> irs;
  std::vector<Job> jobs;
  std::vector<std::pair<size_t, const StepIR*>> in_situ;  // (place in opts.scenarios, IR)
  for (const auto& file : opts.scenarios) {
    const Scenario s = load_scenario(file, opts.sets);
    irs.push_back(build_step_ir(s));
    const StepIR& ir = irs.back();
    res.scenarios.push_back(s.name);
    const bool executed = opts.in_situ && executes_in_situ(ir.layout.world(), N);
    if (executed) in_situ.emplace_back(irs.size() - 1, &ir);
    if (!executed) jobs.push_back({&ir, rank % ir.layout.world(), "scenario " + s.name});
  }
  std::filesystem::path base_file = opts.base_topology;
  if (base_file.empty()) base_file = irs.empty() ? resolve_topology("cpu-host", ".", SourceLoc{}, "topology") : irs.front().scenario.topology.file;
  res.base = load_topology(base_file);

  TempDir tmp("paralab-calibrate");
  const std::filesystem::path tiny = write_text(tmp.path() / "tiny.toml", scenario_text("tiny", base_file, 1, 1, 1));
  const std::filesystem::path llama = write_text(tmp.path() / "tiny-llama.toml", scenario_text("tiny-llama", base_file, 1, 1, 1));
  if (opts.sweep) {
    for (const SweepPoint& p : sweep_points(opts.quick)) {
      std::vector<std::string> sets = {
          "model.hidden_size=" + std::to_string(p.hidden), "model.num_attention_heads=" + std::to_string(p.heads),
          "model.ffn_hidden_size=" + std::to_string(p.ffn), "model.seq_length=" + std::to_string(p.seq),
          "model.vocab_size=" + std::to_string(p.vocab), "training.micro_batch_size=" + std::to_string(p.mb),
          "training.global_batch_size=" + std::to_string(p.mb), std::string("training.precision=") + p.precision};
      if (std::string(p.preset) == "tiny-llama") sets.push_back("model.num_query_groups=" + std::to_string(std::max<int64_t>(1, p.heads / 2)));
      irs.push_back(build_step_ir(load_scenario(std::string(p.preset) == "tiny" ? tiny : llama, sets)));
      jobs.push_back({&irs.back(), 0, "sweep"});
    }
  }

  // Communication: a sweep of sizes for every pattern, and every call the scenarios make
  // (pattern, dtype, bytes, group size), weighted by how often they make it.
  std::vector<CommCase> sweep_cases;
  for (CommPattern p : {CommPattern::all_reduce, CommPattern::all_gather, CommPattern::reduce_scatter, CommPattern::send_recv,
                        CommPattern::broadcast, CommPattern::all_to_all})
    for (int64_t b : comm_sizes(opts.quick)) sweep_cases.push_back({p, DType::f32, b});
  std::map<int64_t, std::map<CommCase, double>> scenario_calls;  // group size -> call -> count
  for (size_t i = 0; i < opts.scenarios.size(); ++i) {
    const StepIR& ir = irs[i];
    const double ranks_per_stage = static_cast<double>(ir.layout.world()) / static_cast<double>(ir.stages.size());
    for (const StepGraph& g : ir.stages)
      for (const Op& op : g.ops) {
        const DType t = !op.writes.empty() ? op.writes[0].dtype : !op.reads.empty() ? op.reads[0].dtype : DType::f32;
        if (const auto* c = op.collective()) {
          const int64_t n = ir.layout.group_size(c->group);
          if (n > 1 && c->bytes > 0) scenario_calls[n][{pattern_of(c->kind), t, c->bytes}] += ranks_per_stage;
        } else if (const auto* p = op.p2p()) {
          const int64_t n = ir.layout.group_size(p->group);
          if (n > 1 && p->bytes > 0) scenario_calls[n][{CommPattern::send_recv, t, p->bytes}] += ranks_per_stage;
        }
      }
  }
  std::vector<int64_t> group_sizes;  // the communicators measured: pairs, and all ranks
  if (opts.comm && N > 1) {
    if (N % 2 == 0) group_sizes.push_back(2);
    if (N > 2 || N % 2 != 0) group_sizes.push_back(N);
  }
  auto cases_for = [&](int64_t n) {
    std::vector<CommCase> v = sweep_cases;
    for (const auto& [c, count] : scenario_calls[n])
      if (std::find(v.begin(), v.end(), c) == v.end()) v.push_back(c);
    return v;
  };
  double comm_units = 0;
  for (int64_t n : group_sizes) comm_units += 0.25 * static_cast<double>(cases_for(n).size());
  const double units_total =
      static_cast<double>(jobs.size() * static_cast<size_t>(opts.reps + 1)) + comm_units + 1.0 + 4.0 * static_cast<double>(in_situ.size());
  double units = 0;
  auto progress = [&](double add, const std::string& what) {
    units += add;
    if (rank == 0 && opts.progress) opts.progress(std::min(1.0, units / units_total), what);
  };

  // 1 + 2. Compute ops, every rank at once, one pass at a time in lockstep.
  std::map<OpKey, OpSamples> compute;
  constexpr size_t kPerPass = 4;  // instances of a key timed per pass (all of them in small graphs)
  for (const Job& job : jobs) {
    Replayer rp(*job.ir, job.rank, opts.backend);
    if (!res.gpu) res.gpu = rp.device_identity();
    if (res.compute_cpu_time) rp.use_thread_cpu_time();
    const StepGraph& g = rp.graph();
    std::map<OpKey, std::vector<OpId>> inst;
    std::vector<size_t> index(g.ops.size(), 0);
    for (const Op& op : g.ops) {
      if (is_comm(op.kind)) continue;
      auto& v = inst[op_key(op)];
      index[op.id] = v.size();
      v.push_back(op.id);
    }
    std::vector<std::pair<OpId, double>> out;
    for (int p = -1; p < opts.reps; ++p) {  // p = -1: warm-up (allocator, page faults, caches), discarded
      const size_t pass = static_cast<size_t>(std::max(p, 0));
      std::vector<char> want(g.ops.size(), 0);
      for (const auto& [key, ids] : inst) {
        const size_t stride = std::max<size_t>(1, ids.size() / kPerPass);
        for (size_t i = 0; i < ids.size(); ++i) want[ids[i]] = (i + pass) % stride == 0;
      }
      out.clear();
      rp.pass([&](const Op& op) { return want[op.id] != 0; }, out);
      if (p >= 0) {
        for (const auto& [id, us] : out) {
          const Op& op = g.op(id);
          const OpKey key = op_key(op);
          OpSamples& s = compute[key];
          if (s.us.empty() && s.origin.empty()) {
            s.key = key;
            s.flops = op.flops;
            s.bytes = op.bytes;
            const AttentionAttrs* a = op.attention();
            s.exec_flops = op.flops * (a && a->causal ? 0.5 : 1.0);
            s.origin = job.origin;
          }
          s.us.push_back(us);
        }
      }
      int64_t sync = 0;
      world.all_reduce(&sync, 1, ReduceOp::max);  // lockstep: every rank busy in the same pass
      progress(1.0, job.origin);
    }
  }

  // 3. Communication on the backend's own communicators of a small job of N ranks: pairs
  // (tp/base of a TP2 layout) and all N (world/base), every group of a size at once.
  std::vector<CommPoint> comm;
  if (!group_sizes.empty()) {
    const int64_t tensor = N % 2 == 0 ? 2 : 1;
    const std::filesystem::path f =
        write_text(tmp.path() / "comm.toml", scenario_text("tiny", base_file, tensor, N / tensor, N));
    const StepIR cir = build_step_ir(load_scenario(
        f, {"topology.node.devices_per_node=" + std::to_string(std::max<int64_t>(N, res.base.node.devices_per_node))}));
    const exec::RankPlan plan = exec::plan_rank(cir, rank, false);
    std::unique_ptr<exec::Backend> be = exec::make_backend(opts.backend, cir, rank);
    be->setup(plan, world);
    if (!res.gpu) res.gpu = be->device_identity();
    const std::vector<exec::GroupComm*> comms = be->comms();
    auto find = [&](int64_t n) -> exec::GroupComm* {
      const std::string label = n == 2 && tensor == 2 ? "tp/base" : "world/base";
      for (size_t i = 0; i < plan.comms.size(); ++i)
        if (plan.comms[i].label() == label && comms[i] && comms[i]->size() == n) return comms[i];
      return nullptr;
    };
    attach_stream(*be, Stream::compute);
    for (int64_t n : group_sizes) {
      exec::GroupComm* c = find(n);
      if (!c) throw std::runtime_error("calibrate: the backend created no communicator of " + std::to_string(n) + " ranks");
      auto pts = measure_comm(*c, *be, cases_for(n), opts.quick ? 5 : 15,
                              [&] { progress(0.25, "communication, " + std::to_string(n) + " ranks"); });
      comm.insert(comm.end(), pts.begin(), pts.end());
    }
  }

  // 4. Memory bandwidth (host memory; the CPU backend's).
  const double copy = opts.backend == "cpu" ? copy_bandwidth_gbps(world) : 0.0;
  progress(1.0, "memory bandwidth");

  // 5. In-situ: the scenarios of this job's size executed for real, warm-up steps then a
  // measured one, as validate executes them, this launch's share of InSituPlan; rank 0 adds the
  // earlier launches' traces and collects the samples (in_situ.hpp). On a shared 2-core host the
  // arrival skew and the per-call communication time of a small step's few dozen collectives
  // vary by 2x between executions, and a launch's pace by up to 20 % between launches.
  const InSituPlan plan{std::max(1, opts.in_situ_launches)};
  for (const auto& [index, ir] : in_situ) {
    std::vector<StepResult> runs;
    int launches = 1;
    int64_t unreadable = 0;  // every rank learns it before the executions, which all ranks must join
    std::string why;
    if (rank == 0 && !opts.in_situ_from.empty()) {
      try {
        InSituTraces earlier = read_in_situ_traces(opts.in_situ_from, index, *ir);
        runs = std::move(earlier.runs);
        launches += earlier.launches;
      } catch (const std::exception& e) {
        unreadable = 1;
        why = e.what();
      }
    }
    world.all_reduce(&unreadable, 1, ReduceOp::max);
    if (unreadable) throw std::runtime_error(rank == 0 ? why : "rank 0 could not read the earlier launches' in-situ traces");
    for (StepResult& r : execute_in_situ(*ir, world, opts.backend, plan, progress)) runs.push_back(std::move(r));
    if (rank != 0) continue;
    auto& steps = res.in_situ.step_s[ir->scenario.name];
    steps.digest = scenario_digest(ir->scenario);
    steps.launches = launches;
    for (const StepResult& r : runs) steps.s.push_back(r.step_time_s);
    // The in-situ figures come from the executions whose middle one is the fastest half's
    // median step, the machine's own pace (run_noise.hpp, centred_fast_half), the step the file
    // gives and validate compares its runs' with (the same rule on its side). With
    // more ranks than cores, the gaps before compute ops are net of the turns the simulator's
    // core pool takes by itself (all of this job's ranks on this host: a stage's world / pp).
    const double turns =
        res.compute_cpu_time ? sim::CoreShare::turns_of(ir->layout.world() / ir->layout.pp(), res.host.cores) : 1.0;
    for (const int k : centred_fast_half(steps.s))
      collect_in_situ(*ir, runs[static_cast<size_t>(k)], "execution " + ir->scenario.name, res.in_situ, turns);
  }

  // Pool on rank 0.
  const nlohmann::json mine = samples_json(compute, comm, copy);
  const std::vector<uint8_t> cbor = nlohmann::json::to_cbor(mine);
  const std::vector<std::string> all = world.gather_to_root(std::string(cbor.begin(), cbor.end()));
  if (rank != 0) return res;

  std::map<OpKey, OpSamples> pooled;
  std::map<std::tuple<int, int, int64_t, int64_t>, CommPoint> cpool;
  std::vector<double> copies;
  for (const std::string& blob : all) {
    const nlohmann::json j = nlohmann::json::from_cbor(std::vector<uint8_t>(blob.begin(), blob.end()));
    for (const auto& c : j.at("compute")) {
      OpKey k;
      k.kind = static_cast<OpKind>(c.at("kind").get<int>());
      k.m = c.at("m").get<int64_t>();
      k.n = c.at("n").get<int64_t>();
      k.k = c.at("k").get<int64_t>();
      k.batch = c.at("batch").get<int64_t>();
      k.math = static_cast<MathMode>(c.at("math").get<int>());
      k.bytes = c.at("bytes").get<int64_t>();
      OpSamples& s = pooled[k];
      if (s.us.empty()) {
        s.key = k;
        s.flops = c.at("flops").get<double>();
        s.bytes = c.at("op_bytes").get<double>();
        s.exec_flops = c.at("exec_flops").get<double>();
        s.origin = c.at("origin").get<std::string>();
      } else if (s.origin != c.at("origin").get<std::string>() && s.origin.rfind("scenario", 0) != 0) {
        s.origin = c.at("origin").get<std::string>();  // a scenario's own op wins over the sweep
      }
      for (double u : c.at("us")) s.us.push_back(u);
    }
    for (const auto& c : j.at("comm")) {
      const auto key = std::make_tuple(c.at("pattern").get<int>(), c.at("dtype").get<int>(), c.at("group").get<int64_t>(),
                                       c.at("bytes").get<int64_t>());
      CommPoint& p = cpool[key];
      p.pattern = static_cast<CommPattern>(std::get<0>(key));
      p.dtype = static_cast<DType>(std::get<1>(key));
      p.group = std::get<2>(key);
      p.bytes = std::get<3>(key);
      for (double u : c.at("us")) p.us.push_back(u);
    }
    if (j.at("copy_gbps").get<double>() > 0) copies.push_back(j.at("copy_gbps").get<double>());
  }
  // A key executed in situ takes the execution's times: the step runs it beside its rank's
  // communication threads and the other ranks, as `execute` will. With shared cores too: the
  // ranks take core turns under SCHED_BATCH, so an executed op's time no longer holds the time
  // other threads held its core, and its CPU-time replay ran 12-26 % short of it for GEMMs
  // (bench/results/validate_cpu.md, "twenty-fifth session").
  for (auto& [k, s] : res.in_situ.compute) pooled[k] = std::move(s);
  res.in_situ.compute.clear();
  for (auto& [k, s] : pooled) res.compute.push_back(std::move(s));
  for (auto& [k, p] : cpool) {
    // The scenarios' count of this call (measure_comm rounds bytes to whole elements per member).
    for (const auto& [c, count] : scenario_calls[p.group])
      if (c.pattern == p.pattern && c.dtype == p.dtype && std::llabs(c.bytes - p.bytes) < bytes_of(c.dtype) * p.group) p.weight += count;
    res.comm.push_back(std::move(p));
  }
  if (!copies.empty()) {
    std::sort(copies.begin(), copies.end());
    res.copy_gbps = copies[copies.size() / 2];
  }
  res.paralab_version = paralab_version();
  fit_all(res);
  // Drift or constant arrival skew: whichever predicts the executions just taken (arrival_model.hpp).
  std::vector<Scenario> executed;
  for (const auto& [index, ir] : in_situ) executed.push_back(ir->scenario);
  choose_arrival_model(res, executed);
  res.host.loadavg_end = loadavg();
  res.wall_s = std::chrono::duration<double>(clock_type::now() - t_start).count();
  return res;
}

int run_in_situ_launch(exec::Transport& world, const CalibrateOptions& opts, const std::filesystem::path& dir) {
  const InSituPlan plan{std::max(1, opts.in_situ_launches)};
  const size_t n = opts.scenarios.size();
  double units = 0;
  int traced = 0;
  auto progress = [&](double add, const std::string& what) {
    units += add;
    if (world.rank() == 0 && opts.progress) opts.progress(std::min(1.0, units / (4.0 * static_cast<double>(n))), what);
  };
  for (size_t i = 0; i < n; ++i) {
    const StepIR ir = build_step_ir(load_scenario(opts.scenarios[i], opts.sets));
    if (!executes_in_situ(ir.layout.world(), world.size())) {
      progress(4.0, "");
      continue;
    }
    const std::vector<StepResult> runs = execute_in_situ(ir, world, opts.backend, plan, progress);
    if (world.rank() == 0) write_in_situ_traces(dir, i, ir, runs);
    traced += static_cast<int>(runs.size());
  }
  return traced;
}

}  // namespace paralab::calib
