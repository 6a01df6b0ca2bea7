// paralab — summary JSON and Chrome trace-event I/O for step results.
#include "results/result_io.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "ir/enum_names.hpp"

namespace paralab {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}
}  // namespace

nlohmann::json summary_json(const StepResult& r) {
  nlohmann::json j;
  j["kind"] = r.kind;
  j["backend"] = r.backend;
  j["scenario"] = r.scenario;
  j["scenario_digest"] = r.scenario_digest;
  j["topology"] = r.topology;
  j["world_size"] = r.world_size;
  j["step_time_s"] = r.step_time_s;
  j["tokens_per_s"] = r.tokens_per_s;
  j["model_tflops_per_gpu"] = r.model_tflops_per_gpu;
  j["hardware_tflops_per_gpu"] = r.hardware_tflops_per_gpu;
  j["mfu"] = r.mfu;
  j["bubble_fraction"] = r.bubble_fraction;
  j["peak_memory_gib"] = r.peak_memory_gib;
  j["fits_in_memory"] = r.fits_in_memory;
  if (r.oom_rank) j["out_of_memory"] = {{"rank", *r.oom_rank}, {"time_s", r.oom_time_us * 1e-6}};
  nlohmann::json exposed = nlohmann::json::object();
  double exposed_total = 0;
  for (int c = 0; c < kCommClasses; ++c) {
    exposed[std::string(to_string(static_cast<CommClass>(c)))] = r.breakdown.exposed_comm_s[static_cast<size_t>(c)];
    exposed_total += r.breakdown.exposed_comm_s[static_cast<size_t>(c)];
  }
  j["breakdown"] = {{"compute_s", r.breakdown.compute_s},
                    {"exposed_comm_s", exposed},
                    {"exposed_comm_total_s", exposed_total},
                    {"bubble_s", r.breakdown.bubble_s},
                    {"host_s", r.breakdown.host_s}};
  if (r.breakdown.offload_s > 0) j["breakdown"]["offload_s"] = r.breakdown.offload_s;
  j["events"] = r.events;
  j["sim_wall_s"] = r.wall_s;
  j["wall_s"] = r.wall_s;
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankStats& rs : r.ranks)
    ranks.push_back({{"rank", rs.rank},
                     {"stage", rs.stage},
                     {"peak_memory_gib", rs.peak_memory_bytes / kGiB},
                     {"peak_time_s", rs.peak_time_us * 1e-6},
                     {"peak_op", rs.peak_op}});
  j["ranks"] = ranks;
  return j;
}

StepResult result_from_json(const nlohmann::json& j) {
  StepResult r;
  r.kind = j.value("kind", "predicted");
  r.backend = j.value("backend", "simulator");
  r.scenario = j.value("scenario", "");
  r.scenario_digest = j.value("scenario_digest", "");
  r.topology = j.value("topology", "");
  r.world_size = j.value("world_size", int64_t{0});
  r.step_time_s = j.at("step_time_s").get<double>();
  r.tokens_per_s = j.value("tokens_per_s", 0.0);
  r.model_tflops_per_gpu = j.value("model_tflops_per_gpu", 0.0);
  r.hardware_tflops_per_gpu = j.value("hardware_tflops_per_gpu", 0.0);
  r.mfu = j.value("mfu", 0.0);
  r.bubble_fraction = j.value("bubble_fraction", 0.0);
  r.peak_memory_gib = j.value("peak_memory_gib", 0.0);
  r.fits_in_memory = j.value("fits_in_memory", true);
  if (j.contains("out_of_memory")) {
    r.oom_rank = j["out_of_memory"].value("rank", int64_t{0});
    r.oom_time_us = j["out_of_memory"].value("time_s", 0.0) * 1e6;
  }
  if (j.contains("breakdown")) {
    const auto& b = j["breakdown"];
    r.breakdown.compute_s = b.value("compute_s", 0.0);
    r.breakdown.bubble_s = b.value("bubble_s", 0.0);
    r.breakdown.host_s = b.value("host_s", 0.0);
    r.breakdown.offload_s = b.value("offload_s", 0.0);
    if (b.contains("exposed_comm_s"))
      for (int c = 0; c < kCommClasses; ++c)
        r.breakdown.exposed_comm_s[static_cast<size_t>(c)] =
            b["exposed_comm_s"].value(std::string(to_string(static_cast<CommClass>(c))), 0.0);
  }
  r.events = j.value("events", int64_t{0});
  r.wall_s = j.value("wall_s", j.value("sim_wall_s", 0.0));
  if (j.contains("ranks"))
    for (const auto& x : j["ranks"])
      r.ranks.push_back({x.value("rank", int64_t{0}), x.value("stage", int64_t{0}),
                         x.value("peak_memory_gib", 0.0) * kGiB, x.value("peak_time_s", 0.0) * 1e6,
                         x.value("peak_op", OpId{0}), Breakdown{}});
  return r;
}

std::string trace_json(const StepResult& r, const StepIR& ir) {
  std::string out;
  out.reserve(r.ops.size() * 200 + 4096);
  out += "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  char buf[1024];
  bool first = true;
  auto add = [&](const char* s) {
    if (!first) out += ",\n";
    first = false;
    out += s;
  };
  // Process and thread names: one process per rank, one track per stream.
  std::vector<int64_t> seen;
  for (const OpTiming& t : r.ops)
    if (seen.empty() || seen.back() != t.rank) seen.push_back(t.rank);
  for (int64_t rank : seen) {
    const int64_t stage = ir.layout.stage_of(rank);
    std::snprintf(buf, sizeof buf,
                  "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%lld,\"args\":{\"name\":\"rank %lld (stage %lld)\"}}",
                  (long long)rank, (long long)rank, (long long)stage);
    add(buf);
    std::snprintf(buf, sizeof buf, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%lld,\"args\":{\"sort_index\":%lld}}",
                  (long long)rank, (long long)rank);
    add(buf);
    for (int s = 0; s < kStreams; ++s) {
      std::snprintf(buf, sizeof buf,
                    "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%lld,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
                    (long long)rank, s, std::string(to_string(static_cast<Stream>(s))).c_str());
      add(buf);
    }
  }
  for (const OpTiming& t : r.ops) {
    const Op& op = ir.graph_for(t.rank).op(t.op);
    const std::string name = escape(op.full_name());
    const std::string kind(enum_to_string(op.kind));
    std::string extra;
    if (const auto* c = op.collective()) {
      std::snprintf(buf, sizeof buf, ",\"group\":\"%s\",\"collective\":\"%s\"", std::string(to_string(c->group)).c_str(),
                    std::string(to_string(c->kind)).c_str());
      extra = buf;
    } else if (const auto* p = op.p2p()) {
      std::snprintf(buf, sizeof buf, ",\"group\":\"%s\",\"collective\":\"%s\"", std::string(to_string(p->group)).c_str(),
                    kind.c_str());
      extra = buf;
    } else if (const auto* g = op.gemm()) {
      std::snprintf(buf, sizeof buf, ",\"role\":\"%s\",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"batch\":%lld",
                    std::string(to_string(g->role)).c_str(), (long long)g->m, (long long)g->n, (long long)g->k,
                    (long long)g->batch);
      extra = buf;
    }
    if (t.posted_us < t.start_us) {  // waited for its peers from its post (OpTiming::posted_us)
      std::snprintf(buf, sizeof buf, ",\"posted_us\":%.3f", t.posted_us);
      extra += buf;
    }
    std::snprintf(buf, sizeof buf,
                  "{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":%lld,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
                  "\"args\":{\"op_id\":%u,\"kind\":\"%s\",\"stream\":\"%s\",\"layer\":%d,\"microbatch\":%d,\"phase\":\"%s\","
                  "\"flops\":%.6g,\"bytes\":%.6g%s}}",
                  name.c_str(), kind.c_str(), (long long)t.rank, static_cast<int>(op.stream), t.start_us,
                  t.end_us - t.start_us, t.op, kind.c_str(), std::string(to_string(op.stream)).c_str(), op.layer,
                  op.microbatch, std::string(to_string(op.phase)).c_str(), op.flops, op.bytes, extra.c_str());
    add(buf);
  }
  out += "\n],\"otherData\":{\"paralab\":";
  out += summary_json(r).dump();
  out += "}}\n";
  return out;
}

LoadedResult read_result(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot read " + file.string());
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(file.string() + ": not JSON (" + e.what() + ")");
  }
  LoadedResult out;
  out.file = file;
  try {
    if (j.contains("traceEvents")) {
      if (!j.contains("otherData") || !j["otherData"].contains("paralab"))
        throw std::runtime_error("a Chrome trace without paralab's summary (otherData.paralab)");
      out.result = result_from_json(j["otherData"]["paralab"]);
      for (const auto& e : j["traceEvents"]) {
        if (e.value("ph", "") != "X" || !e.contains("args") || !e["args"].contains("op_id")) continue;
        const double ts = e.at("ts").get<double>(), dur = e.at("dur").get<double>();
        const auto& a = e["args"];
        out.result.ops.push_back({e.at("pid").get<int64_t>(), a["op_id"].get<OpId>(), ts, ts + dur, a.value("posted_us", ts)});
        OpMeta m;
        m.name = e.value("name", "");
        m.kind = a.value("kind", "");
        m.phase = a.value("phase", "");
        m.stream = a.value("stream", "");
        m.layer = a.value("layer", -1);
        m.microbatch = a.value("microbatch", -1);
        m.group = a.value("group", "");
        m.collective = a.value("collective", "");
        m.role = a.value("role", "");
        m.m = a.value("m", int64_t{0});
        m.n = a.value("n", int64_t{0});
        m.k = a.value("k", int64_t{0});
        m.batch = a.value("batch", int64_t{0});
        m.flops = a.value("flops", 0.0);
        m.bytes = a.value("bytes", 0.0);
        out.meta.push_back(std::move(m));
      }
      out.has_ops = true;
    } else {
      out.result = result_from_json(j);
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(file.string() + ": not a paralab result (" + e.what() + ")");
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(file.string() + ": " + e.what());
  }
  return out;
}

}  // namespace paralab
