// paralab exec — verification: the report, collective self-checks and end-of-step checks (op
// references: verify_ops.cpp).
#include "exec/verify.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>

#include "exec/error.hpp"
#include "exec/plan.hpp"
#include "exec/verify_values.hpp"
#include "ir/enum_names.hpp"
#include "kernels/dtype.hpp"
#include "kernels/rng.hpp"

namespace paralab::exec {

using namespace verify_detail;

// ---- report ------------------------------------------------------------------------------

void VerifyReport::add(const std::string& category, bool ok, double error, const std::string& failure_message) {
  Category& c = categories[category];
  ++c.total;
  if (ok) ++c.passed;
  c.max_error = std::max(c.max_error, error);
  if (!ok && failures.size() < 20) failures.push_back(failure_message);
}

void VerifyReport::merge(const VerifyReport& o) {
  for (const auto& [k, c] : o.categories) {
    Category& m = categories[k];
    m.passed += c.passed;
    m.total += c.total;
    m.max_error = std::max(m.max_error, c.max_error);
  }
  for (const auto& f : o.failures)
    if (failures.size() < 20) failures.push_back(f);
}

int64_t VerifyReport::total() const {
  int64_t n = 0;
  for (const auto& [k, c] : categories) n += c.total;
  return n;
}

int64_t VerifyReport::failed() const {
  int64_t n = 0;
  for (const auto& [k, c] : categories) n += c.total - c.passed;
  return n;
}

nlohmann::json VerifyReport::to_json() const {
  nlohmann::json j;
  j["checks"] = total();
  j["failed"] = failed();
  nlohmann::json cats = nlohmann::json::object();
  for (const auto& [k, c] : categories) cats[k] = {{"passed", c.passed}, {"total", c.total}, {"max_error", c.max_error}};
  j["categories"] = cats;
  j["failures"] = failures;
  return j;
}

VerifyReport VerifyReport::from_json(const nlohmann::json& j) {
  VerifyReport r;
  for (const auto& [k, c] : j.at("categories").items())
    r.categories[k] = {c.at("passed").get<int64_t>(), c.at("total").get<int64_t>(), c.at("max_error").get<double>()};
  r.failures = j.at("failures").get<std::vector<std::string>>();
  return r;
}

namespace verify_detail {

double load_any(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::bf16: return kernels::bf16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::f16: return kernels::f16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::i32: return static_cast<const int32_t*>(p)[i];
    case DType::u8:
    case DType::fp8: return static_cast<const uint8_t*>(p)[i];
  }
  return 0;
}

std::vector<double> to_doubles(Backend& be, const void* p, DType t, int64_t n) {
  std::vector<uint8_t> raw(static_cast<size_t>(n * bytes_of(t)));
  be.to_host(raw.data(), p, static_cast<int64_t>(raw.size()));
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = load_any(raw.data(), t, i);
  return out;
}

std::vector<uint8_t> from_doubles(const std::vector<double>& v, DType t) {
  std::vector<uint8_t> raw(v.size() * static_cast<size_t>(bytes_of(t)));
  for (size_t i = 0; i < v.size(); ++i) {
    const float x = static_cast<float>(v[i]);
    switch (t) {
      case DType::f32: std::memcpy(raw.data() + 4 * i, &x, 4); break;
      case DType::bf16: {
        const uint16_t h = kernels::f32_to_bf16_bits(x);
        std::memcpy(raw.data() + 2 * i, &h, 2);
        break;
      }
      case DType::f16: {
        const uint16_t h = kernels::f32_to_f16_bits(x);
        std::memcpy(raw.data() + 2 * i, &h, 2);
        break;
      }
      case DType::i32: {
        const auto k = static_cast<int32_t>(v[i]);
        std::memcpy(raw.data() + 4 * i, &k, 4);
        break;
      }
      default: raw[i] = static_cast<uint8_t>(v[i]); break;
    }
  }
  return raw;
}

}  // namespace verify_detail

namespace {

class TimeoutWait final : public WaitPolicy {
 public:
  TimeoutWait(int64_t rank, double limit, std::string what) : rank_(rank), limit_(limit), what_(std::move(what)) {}
  void check(double waited) const override {
    if (waited > limit_)
      throw WatchdogError(rank_, "watchdog: verification " + what_ + " waited " + std::to_string(waited) + " s");
  }

 private:
  int64_t rank_;
  double limit_;
  std::string what_;
};

}  // namespace

// ---- collective sequences ---------------------------------------------------------------

void check_collective_sequences(const RankPlan& plan, const std::vector<GroupComm*>& comms) {
  const StepGraph& g = *plan.graph;
  for (size_t slot = 0; slot < comms.size(); ++slot) {
    GroupComm* c = comms[slot];
    if (!c || plan.comms[slot].p2p || plan.comms[slot].stream == Stream::kCount) continue;  // no ops on base comms
    uint64_t h = 0x9E3779B97F4A7C15ull;
    int64_t count = 0;
    for (OpId id : g.streams[static_cast<size_t>(plan.comms[slot].stream)]) {
      if (plan.ops[id].comm != static_cast<int>(slot)) continue;
      const CollectiveAttrs& a = *g.op(id).collective();
      h = seed_key({h, static_cast<uint64_t>(a.kind), static_cast<uint64_t>(a.op), static_cast<uint64_t>(a.bytes), a.tag});
      ++count;
    }
    const auto v = static_cast<int64_t>(h & 0x3fffffffffffffffull);
    int64_t vals[4] = {v, -v, count, -count};
    c->control_all_reduce(vals, 4, ReduceOp::max);
    if (vals[0] != -vals[1] || vals[2] != -vals[3])
      throw ExecError(plan.rank, "the collectives on communicator " + c->label() + " (ranks " +
                                     std::to_string(c->members().front()) + "..) differ between its members: this rank "
                                     "issues " + std::to_string(count) + " of them, another rank " +
                                     (vals[2] != count ? std::to_string(vals[2]) : std::string("a different sequence")) +
                                     "; the step would deadlock or mismatch (an IR bug)");
  }
}

// ---- collective self-check ------------------------------------------------------------------

void check_collectives(Backend& be, const RankPlan& plan, const std::vector<GroupComm*>& comms, double watchdog_s,
                       VerifyReport& report) {
  const int64_t rank = plan.rank;
  for (size_t slot = 0; slot < comms.size(); ++slot) {
    GroupComm* c = comms[slot];
    if (!c) continue;
    const int64_t g = c->size(), me = c->index();
    const int64_t n = g * 257;  // divisible by the group, not a power of two
    const std::string label = c->label();
    auto buf = [&](int64_t elems, DType t) {
      struct B {
        Backend& be;
        void* p;
        int64_t bytes;
        ~B() { be.deallocate(p, bytes); }
      };
      return std::unique_ptr<B>(new B{be, be.allocate(elems * bytes_of(t)), elems * bytes_of(t)});
    };
    // Rank-dependent integer values: every sum below is exact in fp32 (and in bf16 for the
    // small-range variant: at most 4 * 9 = 36 < 256).
    auto value = [&](int64_t member, int64_t i, bool small) {
      return small ? static_cast<double>((member + 1) + i % 5) : static_cast<double>((member + 1) * (i % 97) + i % 7);
    };
    auto expect_eq = [&](const std::string& what, const std::vector<double>& got, const std::function<double(int64_t)>& want) {
      int64_t bad = -1;
      for (int64_t i = 0; i < static_cast<int64_t>(got.size()) && bad < 0; ++i)
        if (got[static_cast<size_t>(i)] != want(i)) bad = i;
      std::string msg;
      if (bad >= 0)
        msg = "rank " + std::to_string(rank) + ": " + what + " on " + label + ": element " + std::to_string(bad) + " is " +
              std::to_string(got[static_cast<size_t>(bad)]) + ", expected " + std::to_string(want(bad));
      report.add("collectives", bad < 0, 0, msg);
    };
    auto upload = [&](void* p, const std::vector<double>& v, DType t) {
      const auto raw = from_doubles(v, t);
      be.from_host(p, raw.data(), static_cast<int64_t>(raw.size()));
    };
    const TimeoutWait w(rank, watchdog_s, "self-check on " + label);

    if (plan.comms[slot].p2p) {
      // Ring transfers: send to +1, receive from -1 (the pipeline and CP ring pattern).
      const DType t = DType::f32;
      auto s = buf(n, t), r = buf(n, t);
      std::vector<double> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = value(me, i, false);
      upload(s->p, v, t);
      const int to = static_cast<int>((me + 1) % g), from = static_cast<int>((me - 1 + g) % g);
      c->send_recv(s->p, n * 4, to, r->p, n * 4, from, 7, w);
      const int64_t src = (me - 1 + g) % g;
      expect_eq("sendrecv ring", to_doubles(be, r->p, t, n), [&](int64_t i) { return value(src, i, false); });
      continue;
    }
    for (DType t : {DType::f32, DType::bf16}) {
      const bool small = t != DType::f32;
      const std::string ts = t == DType::f32 ? "f32" : "bf16";
      std::vector<double> mine(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) mine[static_cast<size_t>(i)] = value(me, i, small);
      // all_reduce sum and max, in place and out of place.
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
        auto a = buf(n, t), b = buf(n, t);
        upload(a->p, mine, t);
        c->all_reduce(a->p, b->p, n, t, op, w);
        auto want = [&](int64_t i) {
          double acc = op == ReduceOp::sum ? 0 : -1e300;
          for (int64_t m = 0; m < g; ++m) acc = op == ReduceOp::sum ? acc + value(m, i, small) : std::max(acc, value(m, i, small));
          return acc;
        };
        expect_eq("all_reduce(" + std::string(to_string(op)) + ", " + ts + ")", to_doubles(be, b->p, t, n), want);
        c->all_reduce(a->p, a->p, n, t, op, w);
        expect_eq("in-place all_reduce(" + std::string(to_string(op)) + ", " + ts + ")", to_doubles(be, a->p, t, n), want);
      }
      // all_gather of a shard of n/g: out of place and in place (from this rank's shard).
      {
        const int64_t k = n / g;
        auto a = buf(k, t), b = buf(n, t);
        std::vector<double> part(mine.begin(), mine.begin() + k);
        upload(a->p, part, t);
        c->all_gather(a->p, b->p, k, t, w);
        auto want = [&](int64_t i) { return value(i / k, i % k, small); };
        expect_eq("all_gather(" + ts + ")", to_doubles(be, b->p, t, n), want);
        std::vector<double> full(static_cast<size_t>(n), -1.0);
        std::copy(part.begin(), part.end(), full.begin() + me * k);
        upload(b->p, full, t);
        c->all_gather(static_cast<char*>(b->p) + me * k * bytes_of(t), b->p, k, t, w);
        expect_eq("in-place all_gather(" + ts + ")", to_doubles(be, b->p, t, n), want);
      }
      // reduce_scatter: this rank gets the sum of every member's shard `me`.
      {
        const int64_t k = n / g;
        auto a = buf(n, t), b = buf(k, t);
        upload(a->p, mine, t);
        c->reduce_scatter(a->p, b->p, k, t, ReduceOp::sum, w);
        expect_eq("reduce_scatter(sum, " + ts + ")", to_doubles(be, b->p, t, k), [&](int64_t i) {
          double acc = 0;
          for (int64_t m = 0; m < g; ++m) acc += value(m, me * k + i, small);
          return acc;
        });
      }
      // all_to_all: block j of the output is member j's block `me`.
      {
        const int64_t k = n / g;
        auto a = buf(n, t), b = buf(n, t);
        upload(a->p, mine, t);
        c->all_to_all(a->p, b->p, k, t, w);
        expect_eq("all_to_all(" + ts + ")", to_doubles(be, b->p, t, n),
                  [&](int64_t i) { return value(i / k, me * k + i % k, small); });
      }
      // broadcast from the last member.
      {
        auto a = buf(n, t);
        upload(a->p, mine, t);
        const int root = static_cast<int>(g - 1);
        c->broadcast(a->p, n, t, root, w);
        expect_eq("broadcast(" + ts + ")", to_doubles(be, a->p, t, n), [&](int64_t i) { return value(root, i, small); });
      }
    }
  }
}

// ---- after the step -----------------------------------------------------------------------------

void check_after_step(const Runtime& rt, Backend& be, const RankPlan& plan, const std::vector<GroupComm*>& comms,
                      VerifyReport& report) {
  const StepGraph& g = *plan.graph;
  // 1. Every resident buffer is finite (no NaN from poisoned reads, no overflow).
  for (BufferId b = 0; b < g.buffers.size(); ++b) {
    const Buffer& buf = g.buffers[b];
    if (!buf.resident) continue;
    const std::vector<uint8_t> raw = rt.read_buffer(b);
    int64_t bad = -1;
    for (int64_t i = 0; i < buf.elements && bad < 0; ++i)
      if (!std::isfinite(load_any(raw.data(), buf.dtype, i))) bad = i;
    report.add("finite_state", bad < 0, 0,
               bad < 0 ? "" : "rank " + std::to_string(plan.rank) + ": resident buffer '" + buf.name + "' element " +
                                  std::to_string(bad) + " is not finite after the step");
  }
  // 2. Data-parallel replicas hold equal weights after the step where the strategy keeps them
  // equal: DDP, and ZeRO-1/2 when the parameter all-gather ends the step (not overlapped into
  // the next one). Compared as the spread max - min over the dp group.
  const Scenario& s = plan.ir->scenario;
  const int64_t z = s.parallel.zero_stage;
  const bool replicated = plan.dp_size > 1 && (z == 0 || (z < 3 && !s.parallel.overlap_param_gather));
  GroupComm* dp = nullptr;
  for (size_t i = 0; i < plan.comms.size(); ++i)
    if (!plan.comms[i].p2p && plan.comms[i].group == GroupKind::dp && comms[i]) dp = comms[i];
  if (!replicated || !dp) return;
  const TimeoutWait w(plan.rank, 120, "replica check");
  for (BufferId b = 0; b < g.buffers.size(); ++b) {
    const Buffer& buf = g.buffers[b];
    if (!buf.resident || buf.category != MemCategory::weights) continue;
    const std::vector<uint8_t> raw = rt.read_buffer(b);
    std::vector<float> hi(static_cast<size_t>(buf.elements)), lo(hi.size());
    for (int64_t i = 0; i < buf.elements; ++i) {
      hi[static_cast<size_t>(i)] = static_cast<float>(load_any(raw.data(), buf.dtype, i));
      lo[static_cast<size_t>(i)] = -hi[static_cast<size_t>(i)];
    }
    void* p = be.allocate(buf.elements * 8);
    be.from_host(p, hi.data(), buf.elements * 4);
    be.from_host(static_cast<char*>(p) + buf.elements * 4, lo.data(), buf.elements * 4);
    dp->all_reduce(p, p, buf.elements * 2, DType::f32, ReduceOp::max, w);
    be.to_host(hi.data(), p, buf.elements * 4);
    be.to_host(lo.data(), static_cast<char*>(p) + buf.elements * 4, buf.elements * 4);
    be.deallocate(p, buf.elements * 8);
    double spread = 0, scale = 0;
    for (size_t i = 0; i < hi.size(); ++i) {
      spread = std::max(spread, static_cast<double>(hi[i]) + static_cast<double>(lo[i]));
      scale = std::max(scale, std::abs(static_cast<double>(hi[i])));
    }
    const double rel = scale > 0 ? spread / scale : spread;
    report.add("dp_replicas", rel <= 1e-6, rel,
               "rank " + std::to_string(plan.rank) + ": weights '" + buf.name + "' differ across the data-parallel group " +
                   "(max spread " + std::to_string(spread) + ")");
  }
}

}  // namespace paralab::exec
