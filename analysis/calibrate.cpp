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

#include "exec/backends.hpp"
#include "exec/plan.hpp"
#include "ir/enum_names.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/step_ir.hpp"
#include "ir/topology_loader.hpp"

#ifndef PARALAB_VERSION_STRING
#define PARALAB_VERSION_STRING "0.0.0"
#endif

namespace paralab::calib {

namespace {

using clock_type = std::chrono::steady_clock;

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// A temporary directory removed with the object (sweep scenario files).
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "paralab-calibrate-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("calibrate: cannot create a temporary directory");
    dir_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  [[nodiscard]] const std::filesystem::path& path() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

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

CommPattern pattern_of(paralab::CollKind k) {
  switch (k) {
    case paralab::CollKind::all_reduce: return CommPattern::all_reduce;
    case paralab::CollKind::all_gather: return CommPattern::all_gather;
    case paralab::CollKind::reduce_scatter: return CommPattern::reduce_scatter;
    case paralab::CollKind::all_to_all: return CommPattern::all_to_all;
    case paralab::CollKind::broadcast: return CommPattern::broadcast;
  }
  return CommPattern::all_reduce;
}

bool is_memory_bound(OpKind k) {
  return !is_comm(k) && !is_matmul(k);
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

// ---- Host and version ----------------------------------------------------------------------------

HostInfo host_info() {
  HostInfo h;
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) == 0) h.hostname = name;
  h.cores = static_cast<int>(std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN)));
  std::ifstream cpu("/proc/cpuinfo");
  std::string line, flags;
  while (std::getline(cpu, line)) {
    const size_t c = line.find(':');
    if (c == std::string::npos) continue;
    const std::string key = trim(line.substr(0, c)), val = trim(line.substr(c + 1));
    if (key == "model name" && h.cpu_model.empty()) h.cpu_model = val;
    else if (key == "cpu MHz" && h.cpu_mhz == 0) h.cpu_mhz = std::atof(val.c_str());
    else if (key == "flags" && flags.empty()) flags = " " + val + " ";
  }
  const bool avx512 = flags.find(" avx512f ") != std::string::npos;
  const bool avx2 = flags.find(" avx2 ") != std::string::npos;
  const bool fma = flags.find(" fma ") != std::string::npos;
  h.cpu_flags_summary = avx512 ? "avx512f" : avx2 ? "avx2" : "sse";
  if (fma) h.cpu_flags_summary += " fma";
  // Peak of one core: clock x FMA units (2 on every x86 core with AVX2 since Haswell) x fp32
  // lanes x 2 FLOP per FMA (Intel 64 and IA-32 Optimization Reference Manual, "Haswell
  // microarchitecture": two 256-bit FMA ports).
  const double lanes = avx512 ? 16 : avx2 ? 8 : 4;
  const double fma_flops = fma ? 2.0 * 2.0 : 2.0;
  h.theoretical_fp32_tflops_per_core = h.cpu_mhz * 1e6 * lanes * fma_flops * 1e-12;
  const std::string l2 = trim(read_file("/sys/devices/system/cpu/cpu0/cache/index2/size"));
  if (!l2.empty()) {
    double v = std::atof(l2.c_str());
    if (l2.back() == 'K') v /= 1024.0;
    else if (l2.back() != 'M') v /= 1024.0 * 1024.0;
    h.l2_mib = v;
  }
  std::ifstream mem("/proc/meminfo");
  std::string key, unit;
  double kb = 0;
  while (mem >> key >> kb >> unit)
    if (key == "MemTotal:") h.mem_total_gib = kb / (1024.0 * 1024.0);
  h.loadavg_start = trim(read_file("/proc/loadavg"));
  return h;
}

std::string paralab_version() {
  // FNV-1a over this executable: a rebuilt binary is a new version for the caches.
  uint64_t hash = 1469598103934665603ull;
  std::ifstream f("/proc/self/exe", std::ios::binary);
  std::vector<char> buf(1 << 20);
  while (f) {
    f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const std::streamsize got = f.gcount();
    for (std::streamsize i = 0; i < got; ++i) {
      hash ^= static_cast<unsigned char>(buf[static_cast<size_t>(i)]);
      hash *= 1099511628211ull;
    }
  }
  char out[64];
  std::snprintf(out, sizeof out, "%s+%08llx", PARALAB_VERSION_STRING, (unsigned long long)(hash & 0xffffffffull));
  return out;
}

// ---- The job -------------------------------------------------------------------------------------

CalibrationResult run_calibration(exec::Transport& world, const CalibrateOptions& opts) {
  const auto t_start = clock_type::now();
  const int rank = world.rank(), N = world.size();
  CalibrationResult res;
  res.backend = opts.backend;
  res.ranks = N;
  res.reps = opts.reps;
  res.started_utc = utc_now();
  res.host = host_info();

  // The scenarios measured exactly, and the base topology.
  std::deque<StepIR> irs;
  std::vector<Job> jobs;
  for (const auto& file : opts.scenarios) {
    const Scenario s = load_scenario(file, opts.sets);
    irs.push_back(build_step_ir(s));
    const StepIR& ir = irs.back();
    res.scenarios.push_back(s.name);
    jobs.push_back({&ir, rank % ir.layout.world(), "scenario " + s.name});
  }
  std::filesystem::path base_file = opts.base_topology;
  if (base_file.empty()) base_file = irs.empty() ? resolve_topology("cpu-host", ".", SourceLoc{}, "topology") : irs.front().scenario.topology.file;
  res.base = load_topology(base_file);

  TempDir tmp;
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
  const double units_total = static_cast<double>(jobs.size() * static_cast<size_t>(opts.reps + 1)) + comm_units + 1.0;
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
  res.host.loadavg_end = trim(read_file("/proc/loadavg"));
  res.wall_s = std::chrono::duration<double>(clock_type::now() - t_start).count();
  return res;
}

// ---- Fits ------------------------------------------------------------------------------------------

void fit_all(CalibrationResult& r) {
  std::vector<GemmSample> gs;
  std::set<MathMode> maths;
  std::vector<StreamSample> ss;
  std::map<std::string, std::vector<StreamSample>> by_kind;
  for (const OpSamples& s : r.compute) {
    const double t = s.median_us();
    if (t <= 0) continue;
    if (s.key.kind == OpKind::gemm) {
      gs.push_back({s.key.m, s.key.n, s.key.k, s.key.batch, s.key.math, t});
      maths.insert(s.key.math);
    } else if (is_memory_bound(s.key.kind) && s.bytes > 0) {
      const std::string kind(enum_to_string(s.key.kind));
      ss.push_back({"", s.bytes, t});
      by_kind[kind].push_back({kind, s.bytes, t});
    }
  }
  r.gemm.clear();
  for (MathMode m : maths) r.gemm[m] = fit_gemm(gs, m);
  if (!ss.empty()) r.stream = fit_streaming(ss);
  r.stream_by_kind.clear();
  for (const auto& [k, v] : by_kind) r.stream_by_kind[k] = fit_streaming(v);

  // Fused attention: t - t_launch = executed FLOPs / (P(math) * efficiency).
  const Topology& b = r.base;
  const double peak = [&] {
    auto it = r.gemm.find(MathMode::f32);
    double p = b.device.peak(MathMode::f32);
    if (b.device.kind == DeviceKind::cpu && r.host.theoretical_fp32_tflops_per_core > 0) p = r.host.theoretical_fp32_tflops_per_core;
    if (it != r.gemm.end()) p = std::max(p, it->second.flop_per_us * 1e-6 / 0.99);
    return p;
  }();
  for (OpKind kind : {OpKind::attention_fwd, OpKind::attention_bwd}) {
    std::vector<std::vector<double>> X;
    std::vector<double> y;
    for (const OpSamples& s : r.compute) {
      if (s.key.kind != kind) continue;
      const double t = s.median_us() - std::max(0.0, r.stream.latency_us);
      if (t > 0 && s.exec_flops > 0) {
        X.push_back({s.exec_flops});
        y.push_back(t);
      }
    }
    if (X.empty()) continue;
    const LinearFit f = relative_least_squares(X, y, true);
    // c = 1 / (P * eff) in us per FLOP; P in FLOP/us. Attention computes in fp32 on the CPU.
    const double eff = f.coef[0] > 0 ? 1.0 / (f.coef[0] * peak * 1e6) : 0.0;
    (kind == OpKind::attention_fwd ? r.flash_fwd_efficiency : r.flash_bwd_efficiency) = std::clamp(eff, 1e-4, 1.0);
  }

  // The scenarios' calls weigh by how often they occur; the sweep together weighs a tenth of
  // them (it keeps the fit sane beyond the scenarios' sizes), or everything alike without
  // scenarios.
  double scenario_weight = 0;
  int64_t sweep_points = 0;
  for (const CommPoint& p : r.comm) {
    scenario_weight += p.weight;
    sweep_points += p.weight <= 0;
  }
  const double sweep_weight = scenario_weight > 0 && sweep_points > 0 ? 0.1 * scenario_weight / static_cast<double>(sweep_points) : 1.0;
  std::vector<CommSample> cs;
  for (const CommPoint& p : r.comm)
    if (p.median_us() > 0)
      cs.push_back({p.pattern, p.group, static_cast<double>(p.bytes), p.median_us(), p.weight > 0 ? p.weight : sweep_weight});
  r.have_comm_fit = !cs.empty();
  if (r.have_comm_fit) r.comm_fit = fit_alpha_beta(cs);
}

// ---- The calibrated topology -------------------------------------------------------------------------

namespace {

struct DeviceFit {
  double peak_fp32 = 0, gemm_eff = 0, peak_bf16 = 0, peak_f16 = 0;
};

DeviceFit device_fit(const CalibrationResult& r) {
  DeviceFit d;
  const DeviceSpec& b = r.base.device;
  d.peak_fp32 = b.peak(MathMode::f32);
  if (b.kind == DeviceKind::cpu && r.host.theoretical_fp32_tflops_per_core > 0) d.peak_fp32 = r.host.theoretical_fp32_tflops_per_core;
  d.gemm_eff = b.gemm_max_efficiency;
  d.peak_bf16 = b.peak(MathMode::bf16);
  d.peak_f16 = b.peak(MathMode::f16);
  auto f32 = r.gemm.find(MathMode::f32);
  if (f32 != r.gemm.end() && f32->second.flop_per_us > 0) {
    const double rate = f32->second.flop_per_us * 1e-6;  // TFLOP/s
    if (rate / d.peak_fp32 > 0.99) d.peak_fp32 = rate / 0.99;  // faster than the nominal clock (turbo)
    d.gemm_eff = rate / d.peak_fp32;
    if (b.kind == DeviceKind::cpu) {
      // bf16/f16 storage is converted and multiplied in fp32: their "peak" is what makes
      // P(math) x efficiency the measured rate.
      d.peak_bf16 = d.peak_f16 = d.peak_fp32;
      for (MathMode m : {MathMode::bf16, MathMode::f16}) {
        auto it = r.gemm.find(m);
        if (it == r.gemm.end() || it->second.flop_per_us <= 0) continue;
        (m == MathMode::bf16 ? d.peak_bf16 : d.peak_f16) = it->second.flop_per_us * 1e-6 / d.gemm_eff;
        if (m == MathMode::bf16 && r.gemm.find(MathMode::f16) == r.gemm.end()) d.peak_f16 = d.peak_bf16;
      }
    }
  }
  return d;
}

}  // namespace

Topology calibrated_topology(const CalibrationResult& r) {
  Topology t = r.base;
  t.name = r.base.name + "-calibrated";
  t.description = "calibrated by paralab calibrate on " + r.host.hostname + " (" + r.started_utc + ")";
  DeviceSpec& d = t.device;
  const DeviceFit f = device_fit(r);
  d.peak_tflops[math_index(MathMode::f32)] = f.peak_fp32;
  d.gemm_max_efficiency = std::clamp(f.gemm_eff, 1e-4, 1.0);
  if (d.kind == DeviceKind::cpu) {
    d.name = r.host.cpu_model.empty() ? d.name : r.host.cpu_model;
    d.peak_tflops[math_index(MathMode::tf32)] = f.peak_fp32;
    d.peak_tflops[math_index(MathMode::bf16)] = f.peak_bf16;
    d.peak_tflops[math_index(MathMode::f16)] = f.peak_f16;
    d.peak_tflops[math_index(MathMode::fp8)] = 0;
    if (r.host.mem_total_gib > 0) d.memory_gib = std::floor(100.0 * r.host.mem_total_gib / std::max(1, r.ranks)) / 100.0;
    if (r.host.l2_mib > 0) d.l2_mib = r.host.l2_mib;
  }
  if (r.stream.fit.samples > 0) {
    d.launch_overhead_us = std::max(0.0, r.stream.latency_us);
    if (r.copy_gbps > 0) d.mem_bw_gbps = r.copy_gbps;
    if (r.stream.bytes_per_us > 0 && d.mem_bw_gbps > 0) d.mem_efficiency = std::clamp(r.stream.gbps() / d.mem_bw_gbps, 1e-3, 1.0);
  }
  if (r.flash_fwd_efficiency > 0) d.flash_fwd_efficiency = r.flash_fwd_efficiency;
  if (r.flash_bwd_efficiency > 0) d.flash_bwd_efficiency = r.flash_bwd_efficiency;
  t.node.devices_per_node = std::max<int64_t>(t.node.devices_per_node, r.ranks);
  if (r.have_comm_fit) {
    if (r.comm_fit.bytes_per_us > 0) t.node.intra_link.bw_gbps = r.comm_fit.gbps();
    t.node.intra_link.lat_us = r.comm_fit.step_us;
    t.node.intra_link.efficiency = 1.0;
    t.collectives.launch_lat_us = r.comm_fit.launch_us;
    t.collectives.step_lat_us = 0.0;
  }
  t.calibration = Calibration{};
  t.calibration.source = "paralab calibrate --backend " + r.backend + ", " + std::to_string(r.ranks) + " ranks on " +
                         r.host.hostname + " (" + r.host.cpu_model + "), " + r.started_utc + ", paralab " + r.paralab_version;
  for (const OpSamples& s : r.compute) {
    const double t_us = s.median_us();
    if (t_us <= 0) continue;
    if (s.key.kind == OpKind::gemm)
      t.calibration.gemm.push_back({s.key.m, s.key.n, s.key.k, s.key.batch, s.key.math, t_us});
    else if (s.key.bytes > 0)
      t.calibration.kernels.push_back({s.key.kind, s.key.bytes, t_us});
  }
  return t;
}

namespace {

// A TOML float: always with a '.' or an exponent.
std::string fnum(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}
std::string fint(int64_t v) { return std::to_string(v); }
std::string fstr(const std::string& v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string topology_toml(const CalibrationResult& r) {
  const Topology t = calibrated_topology(r);
  const DeviceSpec& d = t.device;
  const HostInfo& h = r.host;
  std::string o;
  char buf[512];
  auto line = [&](const std::string& s) { o += s + "\n"; };
  auto kv = [&](const std::string& k, const std::string& v, const std::string& comment = "") {
    std::string s = k + " = " + v;
    if (!comment.empty()) {
      if (s.size() < 34) s.resize(34, ' ');
      s += " # " + comment;
    }
    line(s);
  };
  const bool cpu = d.kind == DeviceKind::cpu;
  line("# " + t.name + ": written by `paralab calibrate --backend " + r.backend + "` (docs/calibration.md).");
  line("# Measured " + r.started_utc + " on " + h.hostname + " (" + h.cpu_model + ", " + std::to_string(h.cores) +
       " logical CPUs, " + h.cpu_flags_summary + ") by " + std::to_string(r.ranks) +
       " ranks at once (each rank saw the contention of " + std::to_string(r.ranks) + " busy ranks), paralab " +
       r.paralab_version + ".");
  std::snprintf(buf, sizeof buf, "# %d timed passes per job after a warm-up pass; medians. Wall time %.1f s. Load average %s -> %s.",
                r.reps, r.wall_s, h.loadavg_start.c_str(), h.loadavg_end.c_str());
  line(buf);
  if (!r.scenarios.empty()) {
    std::string names;
    for (const auto& n : r.scenarios) names += (names.empty() ? "" : ", ") + n;
    line("# Every compute op of these scenarios was measured exactly (replayed with the executor's code): " + names + ".");
  }
  line("# Based on topology '" + r.base.name + "' (" + r.base.file.string() + "); fitted values replace its own.");
  line("# Units: _gbps = GB/s per direction, _us = microseconds, _tflops = 1e12 FLOP/s.");
  kv("name", fstr(t.name));
  kv("description", fstr(t.description));
  line("");
  line("[device]");
  kv("kind", fstr(std::string(to_string(d.kind))));
  kv("name", fstr(d.name));
  kv("sm_count", fint(d.sm_count), cpu ? "one core per rank" : "from the base topology");
  const DeviceFit f = device_fit(r);
  std::string gemm_note;
  if (auto it = r.gemm.find(MathMode::f32); it != r.gemm.end()) {
    std::snprintf(buf, sizeof buf, "fitted fp32 GEMM rate %.4g TFLOP/s / peak", it->second.flop_per_us * 1e-6);
    gemm_note = buf;
  }
  if (cpu) {
    std::snprintf(buf, sizeof buf, "%.0f MHz x 2 FMA units x %s lanes x 2 FLOP (/proc/cpuinfo)%s", h.cpu_mhz,
                  h.cpu_flags_summary.rfind("avx512", 0) == 0 ? "16" : h.cpu_flags_summary.rfind("avx2", 0) == 0 ? "8" : "4",
                  f.peak_fp32 > h.theoretical_fp32_tflops_per_core * 1.0001 ? ", raised to the measured rate / 0.99" : "");
    kv("peak_fp32_tflops", fnum(d.peak(MathMode::f32)), buf);
    kv("peak_tf32_tflops", fnum(d.peak(MathMode::tf32)), "no TF32 on CPUs: computed in fp32");
    kv("peak_bf16_tflops", fnum(d.peak(MathMode::bf16)),
       r.gemm.count(MathMode::bf16) ? "fp32 peak x measured bf16/fp32 GEMM rate (conversion cost)" : "as fp32 (not measured)");
    kv("peak_fp16_tflops", fnum(d.peak(MathMode::f16)),
       r.gemm.count(MathMode::f16) ? "fp32 peak x measured f16/fp32 GEMM rate" : "as bf16 (converted alike)");
    kv("peak_fp8_tflops", fnum(0), "not supported on the CPU backend");
    kv("memory_gib", fnum(d.memory_gib), "MemTotal / ranks");
  } else {
    kv("peak_fp32_tflops", fnum(d.peak(MathMode::f32)), "from the base topology");
    kv("peak_tf32_tflops", fnum(d.peak(MathMode::tf32)), "from the base topology");
    kv("peak_bf16_tflops", fnum(d.peak(MathMode::bf16)), "from the base topology");
    kv("peak_fp16_tflops", fnum(d.peak(MathMode::f16)), "from the base topology");
    kv("peak_fp8_tflops", fnum(d.peak(MathMode::fp8)), "from the base topology");
    kv("memory_gib", fnum(d.memory_gib), "from the base topology");
  }
  kv("mem_bw_gbps", fnum(d.mem_bw_gbps), r.copy_gbps > 0 ? "measured: 64 MiB memcpy, every rank at once (read + write)" : "from the base topology");
  kv("l2_mib", fnum(d.l2_mib), cpu ? "/sys/devices/system/cpu/cpu0/cache/index2" : "from the base topology");
  if (r.stream.fit.samples > 0) {
    std::snprintf(buf, sizeof buf, "fitted intercept of t = t0 + bytes/BW over %lld kernel shapes (rms error %.0f%%)",
                  (long long)r.stream.fit.samples, 100 * r.stream.fit.rms_rel_error);
    kv("launch_overhead_us", fnum(d.launch_overhead_us), buf);
  } else {
    kv("launch_overhead_us", fnum(d.launch_overhead_us), "from the base topology");
  }
  kv("gemm_max_efficiency", fnum(d.gemm_max_efficiency), gemm_note.empty() ? "from the base topology" : gemm_note);
  kv("gemm_tile_m", fint(d.gemm_tile_m), cpu ? "no wave quantization on a CPU core" : "from the base topology");
  kv("gemm_tile_n", fint(d.gemm_tile_n));
  if (r.stream.fit.samples > 0 && d.mem_bw_gbps > 0) {
    std::snprintf(buf, sizeof buf, "fitted kernel bandwidth %.3g GB/s / mem_bw_gbps", r.stream.gbps());
    kv("mem_efficiency", fnum(d.mem_efficiency), buf);
  } else {
    kv("mem_efficiency", fnum(d.mem_efficiency), "from the base topology");
  }
  kv("flash_fwd_efficiency", fnum(d.flash_fwd_efficiency),
     r.flash_fwd_efficiency > 0 ? "fitted: executed FLOPs / (fp32 peak x (t - t0)) over the attention_fwd points" : "from the base topology");
  kv("flash_bwd_efficiency", fnum(d.flash_bwd_efficiency),
     r.flash_bwd_efficiency > 0 ? "fitted likewise over the attention_bwd points" : "from the base topology");
  line("");
  line("[node]");
  kv("devices_per_node", fint(t.node.devices_per_node), "at least the ranks measured");
  kv("intra", fstr(std::string(to_string(t.node.intra))));
  if (r.have_comm_fit) {
    std::snprintf(buf, sizeof buf, "fitted B of t = L + steps x alpha + wire bytes / B over %lld calls (rms error %.0f%%)",
                  (long long)r.comm_fit.fit.samples, 100 * r.comm_fit.fit.rms_rel_error);
    kv("intra_bw_gbps", fnum(t.node.intra_link.bw_gbps), buf);
    kv("intra_lat_us", fnum(t.node.intra_link.lat_us), "fitted alpha: per ring step (link latency + MPI progress)");
    kv("intra_efficiency", fnum(1.0), "the fitted bandwidth is already what collectives reach");
  } else {
    kv("intra_bw_gbps", fnum(t.node.intra_link.bw_gbps), "from the base topology (not measured: one rank)");
    kv("intra_lat_us", fnum(t.node.intra_link.lat_us), "from the base topology");
    kv("intra_efficiency", fnum(t.node.intra_link.efficiency), "from the base topology");
  }
  if (t.node.pcie.bw_gbps > 0) {
    kv("pcie_bw_gbps", fnum(t.node.pcie.bw_gbps), "from the base topology");
    kv("pcie_lat_us", fnum(t.node.pcie.lat_us));
    kv("pcie_efficiency", fnum(t.node.pcie.efficiency));
  }
  kv("nics_per_node", fint(t.node.nics_per_node), "from the base topology");
  if (t.node.nics_per_node > 0) {
    kv("nic_bw_gbps", fnum(t.node.nic.bw_gbps));
    kv("nic_lat_us", fnum(t.node.nic.lat_us));
    kv("nic_efficiency", fnum(t.node.nic.efficiency));
  }
  line("");
  line("[network]");
  kv("kind", fstr(std::string(to_string(t.network.kind))), "from the base topology");
  if (t.network.kind != NetworkKind::none) {
    kv("levels", fint(t.network.levels));
    kv("radix", fint(t.network.radix));
    kv("oversubscription", fnum(t.network.oversubscription));
    kv("link_bw_gbps", fnum(t.network.switch_link.bw_gbps));
    kv("switch_lat_us", fnum(t.network.switch_link.lat_us));
    kv("link_efficiency", fnum(t.network.switch_link.efficiency));
  }
  line("");
  line("[collectives]");
  if (r.have_comm_fit) {
    kv("launch_lat_us", fnum(t.collectives.launch_lat_us), "fitted L: once per call");
    kv("step_lat_us", fnum(0.0), "folded into intra_lat_us (only their sum is identifiable on one node)");
  } else {
    kv("launch_lat_us", fnum(t.collectives.launch_lat_us), "from the base topology");
    kv("step_lat_us", fnum(t.collectives.step_lat_us), "from the base topology");
  }
  kv("tree_max_bytes", fnum(t.collectives.tree_max_bytes));
  line("");

  // How well the fits describe the points (for people reading the file).
  line("# ---- Fits (docs/calibration.md) ----");
  for (const auto& [m, g] : r.gemm) {
    std::snprintf(buf, sizeof buf,
                  "# GEMM %s: t = %.3g us x batch + 2mnk batch / (%.4g GFLOP/s) + %.3g ns x (mk + kn) batch + %.3g ns x mn batch; "
                  "%lld shapes, rms error %.1f%%, max %.1f%%",
                  std::string(enum_to_string(m)).c_str(), g.call_us, g.flop_per_us * 1e-3, g.pack_us_per_elem * 1e3,
                  g.store_us_per_elem * 1e3, (long long)g.fit.samples, 100 * g.fit.rms_rel_error, 100 * g.fit.max_rel_error);
    line(buf);
  }
  for (const auto& [k, s] : r.stream_by_kind) {
    std::snprintf(buf, sizeof buf, "# %-16s t = %.3g us + bytes / %.4g GB/s  (%lld sizes, rms error %.1f%%)", k.c_str(),
                  s.latency_us, s.gbps(), (long long)s.fit.samples, 100 * s.fit.rms_rel_error);
    line(buf);
  }
  if (r.have_comm_fit) {
    std::snprintf(buf, sizeof buf, "# communication: L = %.3g us, alpha = %.3g us per step, B = %.4g GB/s; measured vs fitted:",
                  r.comm_fit.launch_us, r.comm_fit.step_us, r.comm_fit.gbps());
    line(buf);
    for (const CommPoint& p : r.comm) {
      std::snprintf(buf, sizeof buf, "#   %-14s %-4s n=%lld %10lld B  %10.1f us  fit %10.1f us%s", std::string(to_string(p.pattern)).c_str(),
                    std::string(enum_to_string(p.dtype)).c_str(), (long long)p.group, (long long)p.bytes, p.median_us(),
                    r.comm_fit.predict_us(p.pattern, p.group, static_cast<double>(p.bytes)),
                    p.weight > 0 ? ("  (scenario: " + std::to_string(static_cast<long long>(p.weight)) + " calls)").c_str() : "");
      line(buf);
    }
  }
  line("");
  line("[calibration]");
  kv("source", fstr(t.calibration.source));
  line("");
  // Points: medians over every rank and pass; the comment gives the spread and the origin.
  for (const OpSamples& s : r.compute) {
    const double med = s.median_us();
    if (med <= 0) continue;
    const std::string where = s.origin + ", " + std::to_string(s.us.size()) + " runs";
    if (s.key.kind == OpKind::gemm) {
      const double eff = 2.0 * static_cast<double>(s.key.m) * static_cast<double>(s.key.n) * static_cast<double>(s.key.k) *
                         static_cast<double>(s.key.batch) / (med * 1e6 * std::max(1e-12, d.peak(s.key.math)));
      std::snprintf(buf, sizeof buf,
                    "[[calibration.gemm]]  # %s, p25-p75 %.4g-%.4g us, %.1f%% of peak\nm = %lld\nn = %lld\nk = %lld\nbatch = %lld\nmath = \"%s\"\ntime_us = %s\n",
                    where.c_str(), s.quantile_us(0.25), s.quantile_us(0.75), 100 * eff, (long long)s.key.m, (long long)s.key.n,
                    (long long)s.key.k, (long long)s.key.batch, std::string(enum_to_string(s.key.math)).c_str(), fnum(med).c_str());
    } else {
      if (s.key.bytes <= 0) continue;
      std::snprintf(buf, sizeof buf, "[[calibration.kernel]]  # %s, p25-p75 %.4g-%.4g us\nkind = \"%s\"\nbytes = %lld\ntime_us = %s\n",
                    where.c_str(), s.quantile_us(0.25), s.quantile_us(0.75), std::string(enum_to_string(s.key.kind)).c_str(),
                    (long long)s.key.bytes, fnum(med).c_str());
    }
    o += buf;
  }
  return o;
}

}  // namespace paralab::calib
