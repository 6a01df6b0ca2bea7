// paralab — the calibration's measuring jobs (jobs.hpp).
#include "analysis/calibration/jobs.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "exec/backends.hpp"
#include "exec/plan.hpp"
#include "ir/scenario_loader.hpp"

namespace paralab::calib::detail {

namespace {

using clock_type = std::chrono::steady_clock;

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

}  // namespace

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

namespace {

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

std::vector<ReplayJob> sweep_jobs(bool quick, const std::filesystem::path& base, const std::filesystem::path& tmp,
                                  std::deque<StepIR>& irs) {
  const std::filesystem::path tiny = write_text(tmp / "tiny.toml", scenario_text("tiny", base, 1, 1, 1));
  const std::filesystem::path llama = write_text(tmp / "tiny-llama.toml", scenario_text("tiny-llama", base, 1, 1, 1));
  std::vector<ReplayJob> jobs;
  for (const SweepPoint& p : sweep_points(quick)) {
    std::vector<std::string> sets = {
        "model.hidden_size=" + std::to_string(p.hidden), "model.num_attention_heads=" + std::to_string(p.heads),
        "model.ffn_hidden_size=" + std::to_string(p.ffn), "model.seq_length=" + std::to_string(p.seq),
        "model.vocab_size=" + std::to_string(p.vocab), "training.micro_batch_size=" + std::to_string(p.mb),
        "training.global_batch_size=" + std::to_string(p.mb), std::string("training.precision=") + p.precision};
    const bool is_llama = std::string(p.preset) == "tiny-llama";
    if (is_llama) sets.push_back("model.num_query_groups=" + std::to_string(std::max<int64_t>(1, p.heads / 2)));
    irs.push_back(build_step_ir(load_scenario(is_llama ? llama : tiny, sets)));
    jobs.push_back({&irs.back(), 0, "sweep"});
  }
  return jobs;
}

void replay_compute(const std::vector<ReplayJob>& jobs, exec::Transport& world, const CalibrateOptions& opts,
                    bool cpu_time, std::map<OpKey, OpSamples>& compute, std::optional<exec::DeviceIdentity>& gpu,
                    const Progress& progress) {
  constexpr size_t kPerPass = 4;  // instances of a key timed per pass (all of them in small graphs)
  for (const ReplayJob& job : jobs) {
    Replayer rp(*job.ir, job.rank, opts.backend);
    if (!gpu) gpu = rp.device_identity();
    if (cpu_time) rp.use_thread_cpu_time();
    const StepGraph& g = rp.graph();
    std::map<OpKey, std::vector<OpId>> inst;
    for (const Op& op : g.ops)
      if (!is_comm(op.kind)) inst[op_key(op)].push_back(op.id);
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
      for (const auto& [id, us] : out) {
        if (p < 0) break;
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
      int64_t sync = 0;
      world.all_reduce(&sync, 1, ReduceOp::max);  // lockstep: every rank busy in the same pass
      progress(1.0, job.origin);
    }
  }
}

ScenarioCalls scenario_calls(const std::vector<const StepIR*>& irs) {
  ScenarioCalls calls;
  for (const StepIR* ir : irs) {
    const double ranks_per_stage = static_cast<double>(ir->layout.world()) / static_cast<double>(ir->stages.size());
    for (const StepGraph& g : ir->stages)
      for (const Op& op : g.ops) {
        const DType t = !op.writes.empty() ? op.writes[0].dtype : !op.reads.empty() ? op.reads[0].dtype : DType::f32;
        if (const auto* c = op.collective()) {
          const int64_t n = ir->layout.group_size(c->group);
          if (n > 1 && c->bytes > 0) calls[n][{pattern_of(c->kind), t, c->bytes}] += ranks_per_stage;
        } else if (const auto* p = op.p2p()) {
          const int64_t n = ir->layout.group_size(p->group);
          if (n > 1 && p->bytes > 0) calls[n][{CommPattern::send_recv, t, p->bytes}] += ranks_per_stage;
        }
      }
  }
  return calls;
}

namespace {

// The communicators measured: pairs, and all ranks.
std::vector<int64_t> group_sizes(int n, const CalibrateOptions& opts) {
  std::vector<int64_t> out;
  if (!opts.comm || n < 2) return out;
  if (n % 2 == 0) out.push_back(2);
  if (n > 2 || n % 2 != 0) out.push_back(n);
  return out;
}

std::vector<CommCase> cases_for(int64_t n, const CalibrateOptions& opts, const ScenarioCalls& calls) {
  std::vector<CommCase> v;
  for (CommPattern p : {CommPattern::all_reduce, CommPattern::all_gather, CommPattern::reduce_scatter, CommPattern::send_recv,
                        CommPattern::broadcast, CommPattern::all_to_all})
    for (int64_t b : comm_sizes(opts.quick)) v.push_back({p, DType::f32, b});
  if (auto it = calls.find(n); it != calls.end())
    for (const auto& [c, count] : it->second)
      if (std::find(v.begin(), v.end(), c) == v.end()) v.push_back(c);
  return v;
}

}  // namespace

double comm_sweep_units(int n, const CalibrateOptions& opts, const ScenarioCalls& calls) {
  double units = 0;
  for (int64_t g : group_sizes(n, opts)) units += 0.25 * static_cast<double>(cases_for(g, opts, calls).size());
  return units;
}

std::vector<CommPoint> comm_sweep(exec::Transport& world, const CalibrateOptions& opts, const Topology& base,
                                  const std::filesystem::path& base_file, const std::filesystem::path& tmp,
                                  const ScenarioCalls& calls, std::optional<exec::DeviceIdentity>& gpu, const Progress& progress) {
  const int N = world.size(), rank = world.rank();
  std::vector<CommPoint> comm;
  const std::vector<int64_t> sizes = group_sizes(N, opts);
  if (sizes.empty()) return comm;
  // A small job of N ranks on the backend's own communicators: pairs (tp/base of a TP2 layout)
  // and all N (world/base).
  const int64_t tensor = N % 2 == 0 ? 2 : 1;
  const std::filesystem::path f = write_text(tmp / "comm.toml", scenario_text("tiny", base_file, tensor, N / tensor, N));
  const StepIR cir = build_step_ir(load_scenario(
      f, {"topology.node.devices_per_node=" + std::to_string(std::max<int64_t>(N, base.node.devices_per_node))}));
  const exec::RankPlan plan = exec::plan_rank(cir, rank, false);
  std::unique_ptr<exec::Backend> be = exec::make_backend(opts.backend, cir, rank);
  be->setup(plan, world);
  if (!gpu) gpu = be->device_identity();
  const std::vector<exec::GroupComm*> comms = be->comms();
  auto find = [&](int64_t n) -> exec::GroupComm* {
    const std::string label = n == 2 && tensor == 2 ? "tp/base" : "world/base";
    for (size_t i = 0; i < plan.comms.size(); ++i)
      if (plan.comms[i].label() == label && comms[i] && comms[i]->size() == n) return comms[i];
    return nullptr;
  };
  attach_stream(*be, Stream::compute);
  for (int64_t n : sizes) {
    exec::GroupComm* c = find(n);
    if (!c) throw std::runtime_error("calibrate: the backend created no communicator of " + std::to_string(n) + " ranks");
    auto pts = measure_comm(*c, *be, cases_for(n, opts, calls), opts.quick ? 5 : 15,
                            [&] { progress(0.25, "communication, " + std::to_string(n) + " ranks"); });
    comm.insert(comm.end(), pts.begin(), pts.end());
  }
  return comm;
}

void pool_samples(exec::Transport& world, const std::map<OpKey, OpSamples>& compute, const std::vector<CommPoint>& comm,
                  double copy_gbps, const ScenarioCalls& calls, CalibrationResult& r) {
  const std::vector<uint8_t> cbor = nlohmann::json::to_cbor(samples_json(compute, comm, copy_gbps));
  const std::vector<std::string> all = world.gather_to_root(std::string(cbor.begin(), cbor.end()));
  if (world.rank() != 0) return;
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
  for (auto& [k, s] : pooled) r.compute.push_back(std::move(s));
  for (auto& [k, p] : cpool) {
    // The scenarios' count of this call (measure_comm rounds bytes to whole elements per member).
    if (auto it = calls.find(p.group); it != calls.end())
      for (const auto& [c, count] : it->second)
        if (c.pattern == p.pattern && c.dtype == p.dtype && std::llabs(c.bytes - p.bytes) < bytes_of(c.dtype) * p.group) p.weight += count;
    r.comm.push_back(std::move(p));
  }
  if (!copies.empty()) {
    std::sort(copies.begin(), copies.end());
    r.copy_gbps = copies[copies.size() / 2];
  }
}

}  // namespace paralab::calib::detail
