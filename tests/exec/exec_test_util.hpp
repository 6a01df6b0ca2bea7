// tests/exec — helpers: scenarios from scenarios/ with overrides, and ops/contexts built by
// hand for the CPU backend's op implementations.
#pragma once

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "exec/cpu/cpu_math.hpp"
#include "exec/plan.hpp"
#include "ir/scenario_loader.hpp"
#include "ir/step_ir.hpp"
#include "kernels/dtype.hpp"

namespace paralab::exec::test {

inline std::string source_dir() {
  const char* env = std::getenv("PARALAB_SOURCE_DIR");
  return env ? env : PARALAB_SOURCE_DIR;
}

inline Scenario scenario(const std::string& name, std::vector<std::string> sets = {}) {
  return load_scenario(source_dir() + "/scenarios/" + name + ".toml", sets);
}

// Storage of n elements in `t` filled from fp32 values.
inline std::vector<uint8_t> storage(const std::vector<float>& v, DType t) {
  std::vector<uint8_t> out(v.size() * static_cast<size_t>(bytes_of(t)));
  cpu::store_f32(out.data(), t, static_cast<int64_t>(v.size()), v.data());
  return out;
}
inline std::vector<float> values(const std::vector<uint8_t>& s, DType t) {
  std::vector<float> out(s.size() / static_cast<size_t>(bytes_of(t)));
  cpu::load_f32(s.data(), t, static_cast<int64_t>(out.size()), out.data());
  return out;
}
inline std::vector<float> random_floats(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

class NoWait final : public WaitPolicy {
 public:
  void check(double) const override {}
};

// Everything an op implementation needs, for a hand-built op.
struct OpHarness {
  Op op;
  OpPlan plan;
  std::vector<void*> reads, writes;
  NoWait wait;
  OpCall call() const { return OpCall{op, plan, reads, writes, wait, 1}; }
  void add_read(void* p, int64_t numel, DType t) {
    reads.push_back(p);
    plan.reads.push_back({0, 0, numel, t});
  }
  void add_write(void* p, int64_t numel, DType t) {
    writes.push_back(p);
    plan.writes.push_back({0, 0, numel, t});
  }
};

struct CpuHarness {
  RankPlan plan;
  ModelShape shape;
  Scenario scenario;
  cpu::Scratch scratch;
  kernels::LossScaleState scaler;
  cpu::CpuContext ctx() { return cpu::CpuContext{plan, shape, scenario, scratch, scaler}; }
};

}  // namespace paralab::exec::test
