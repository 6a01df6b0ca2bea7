// paralab plan under mpirun: the sharded job runner (plan_mpi.hpp).
#include "apps/plan_mpi.hpp"

#include <optional>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "ir/enum_names.hpp"

namespace paralab::cli {

namespace {

// One list of a planned layout's exchanged fields serves both directions: `f` visits each
// member in a fixed order (the figures kept, not the ops).
template <class L, class F>
void layout_fields(L& l, F&& f) {
  auto& c = l.candidate;
  f(c.tensor), f(c.pipeline), f(c.context), f(c.data), f(c.virtual_stages), f(c.schedule), f(c.micro_batch);
  f(c.zero_stage), f(c.recompute), f(c.sequence_parallel);
  auto& r = l.result;
  f(r.scenario), f(r.scenario_digest), f(r.topology), f(r.world_size), f(r.step_time_s), f(r.tokens_per_s);
  f(r.model_tflops_per_gpu), f(r.hardware_tflops_per_gpu), f(r.mfu), f(r.bubble_fraction), f(r.peak_memory_gib);
  f(r.fits_in_memory), f(r.oom_rank), f(r.oom_time_us), f(r.events), f(r.wall_s);
  auto& b = r.breakdown;
  f(b.compute_s), f(b.exposed_comm_s), f(b.bubble_s), f(b.host_s);
  f(l.fidelity), f(l.sim_wall_s);
  auto& m = l.estimate;
  f(m.peak_bytes), f(m.stage), f(m.resident), f(m.activations), f(m.transient);
}

struct Writer {
  nlohmann::json& out;
  template <class T>
  void operator()(const T& v) {
    if constexpr (std::is_enum_v<T>) out.push_back(static_cast<int>(v));
    else if constexpr (std::is_same_v<T, std::optional<int64_t>>) out.push_back(v ? *v : -1);
    else out.push_back(v);
  }
};

struct Reader {
  const nlohmann::json& in;
  size_t at = 0;
  template <class T>
  void operator()(T& v) {
    const nlohmann::json& x = in.at(at++);
    if constexpr (std::is_enum_v<T>) v = static_cast<T>(x.get<int>());
    else if constexpr (std::is_same_v<T, std::optional<int64_t>>) v = x.get<int64_t>() >= 0 ? std::optional<int64_t>(x.get<int64_t>()) : std::nullopt;
    else v = x.get<T>();
  }
};

}  // namespace

std::string to_bytes(const std::vector<PlannedLayout>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const PlannedLayout& l : v) {
    nlohmann::json e = nlohmann::json::array();
    layout_fields(l, Writer{e});
    a.push_back(std::move(e));
  }
  const std::vector<uint8_t> cbor = nlohmann::json::to_cbor(a);
  return std::string(cbor.begin(), cbor.end());
}

std::vector<PlannedLayout> from_bytes(const std::string& b) {
  const nlohmann::json a = nlohmann::json::from_cbor(std::vector<uint8_t>(b.begin(), b.end()));
  std::vector<PlannedLayout> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) layout_fields(out[i], Reader{a[i]});
  return out;
}

std::vector<std::string> all_gather(exec::Transport& world, exec::GroupComm& all, const std::string& blob) {
  std::vector<std::string> parts = world.gather_to_root(blob);
  std::string packed;
  if (world.rank() == 0) {
    nlohmann::json j = nlohmann::json::array();
    for (const std::string& p : parts) j.push_back(nlohmann::json::binary(std::vector<uint8_t>(p.begin(), p.end())));
    const std::vector<uint8_t> cbor = nlohmann::json::to_cbor(j);
    packed.assign(cbor.begin(), cbor.end());
  }
  int64_t n = static_cast<int64_t>(packed.size());
  world.all_reduce(&n, 1, ReduceOp::max);
  packed.resize(static_cast<size_t>(n));
  all.broadcast(packed.data(), n, DType::u8, 0, exec::NoWatchdog{});
  const nlohmann::json j = nlohmann::json::from_cbor(std::vector<uint8_t>(packed.begin(), packed.end()));
  std::vector<std::string> out;
  for (const auto& p : j) {
    const auto& bin = p.get_binary();
    out.emplace_back(bin.begin(), bin.end());
  }
  return out;
}

JobRunner mpi_runner(exec::Transport& world, int threads) {
  std::vector<int64_t> members(static_cast<size_t>(world.size()));
  for (size_t r = 0; r < members.size(); ++r) members[r] = static_cast<int64_t>(r);
  auto all = std::shared_ptr<exec::GroupComm>(world.split(0, world.rank(), members, "plan/world"));
  const JobRunner local = local_runner(threads);
  return [&world, all, local](const Scenario& base, const std::vector<SimJob>& jobs) {
    const size_t n = static_cast<size_t>(world.size()), me = static_cast<size_t>(world.rank());
    std::vector<SimJob> mine;
    for (size_t i = me; i < jobs.size(); i += n) mine.push_back(jobs[i]);
    const std::vector<std::string> parts = all_gather(world, *all, to_bytes(local(base, mine)));
    std::vector<PlannedLayout> out(jobs.size());
    for (size_t r = 0; r < n; ++r) {
      std::vector<PlannedLayout> got = from_bytes(parts[r]);
      for (size_t k = 0; k < got.size(); ++k) out[r + k * n] = std::move(got[k]);
    }
    return out;
  };
}

}  // namespace paralab::cli
