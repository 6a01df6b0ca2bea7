// paralab — IR generation for every stage, and per-rank resolution of groups and peers.
#include "ir/step_ir.hpp"

#include <thread>

#include "ir/error.hpp"
#include "ir/stage_builder.hpp"

namespace paralab {

int64_t nvlink_domain_devices(const Scenario& s) {
  const NodeSpec& n = s.topology.node;
  return s.cluster.devices_per_node == n.devices_per_node ? n.nvlink_domain() : s.cluster.devices_per_node;
}

Layout layout_of(const Scenario& s) {
  return Layout(s.parallel.tensor, s.parallel.context, s.parallel.data, s.parallel.pipeline, nvlink_domain_devices(s));
}

void require_generated_model(const Scenario& s) {
  const char* what = "are counted by `paralab inspect`, but their step ops are not generated yet (docs/moe.md)";
  if (s.model.moe.enabled())
    throw ConfigError(s.provenance.at("model.num_experts"), "model.num_experts", std::to_string(s.model.moe.num_experts),
                      std::string("mixture-of-experts layers ") + what,
                      "0 (a dense model) to simulate, plan, execute or export");
  if (s.model.mla.multi_latent_attention)
    throw ConfigError(s.provenance.at("model.multi_latent_attention"), "model.multi_latent_attention", "true",
                      std::string("multi-head latent attention layers ") + what,
                      "false to simulate, plan, execute or export");
}

StepIR build_step_ir(const Scenario& s, int threads) {
  require_generated_model(s);
  StepIR ir{s, layout_of(s), ModelShape::from(s), {}};
  const int64_t p = s.parallel.pipeline;
  ir.stages.resize(static_cast<size_t>(p));
  auto build = [&](int64_t stage) { ir.stages[static_cast<size_t>(stage)] = StageBuilder(s, stage).build(); };
  if (threads <= 1 || p == 1) {
    for (int64_t st = 0; st < p; ++st) build(st);
    return ir;
  }
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(threads));
  for (int w = 0; w < threads; ++w)
    pool.emplace_back([&, w] {
      try {
        for (int64_t st = w; st < p; st += threads) build(st);
      } catch (...) {
        errors[static_cast<size_t>(w)] = std::current_exception();
      }
    });
  for (auto& t : pool) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return ir;
}

std::vector<int64_t> StepIR::group_of(int64_t rank, const Op& op) const {
  if (const auto* c = op.collective()) return layout.members(c->group, rank);
  if (const auto* p = op.p2p()) return layout.members(p->group, rank);
  throw InternalError("StepIR::group_of: op is not communication");
}

int64_t StepIR::peer_of(int64_t rank, const Op& op, bool send) const {
  const auto* p = op.p2p();
  if (!p) throw InternalError("StepIR::peer_of: op is not a transfer");
  const int32_t off = send ? p->send_offset : p->recv_offset;
  if (off == 0) return -1;
  const int64_t n = layout.group_size(p->group);
  const int64_t me = layout.index_in_group(p->group, rank);
  return layout.member_at(p->group, rank, ((me + off) % n + n) % n);
}

}  // namespace paralab
