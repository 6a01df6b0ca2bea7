// paralab — candidate layouts and their application to a scenario.
#include "plan/candidate.hpp"

#include <cstdio>

#include "ir/enum_names.hpp"

namespace paralab {

std::string Candidate::key() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%06lld.%06lld.%06lld.%08lld.%04lld.%d.%06lld.%d.%d.%d.%d.%06lld", (long long)tensor,
                (long long)pipeline, (long long)context, (long long)data, (long long)virtual_stages,
                static_cast<int>(schedule), (long long)micro_batch, (int)zero_stage, static_cast<int>(recompute),
                sequence_parallel ? 1 : 0, count_ends ? 1 : 0, (long long)microbatch_group);
  return buf;
}

std::string Candidate::label() const {
  std::string out = "TP" + std::to_string(tensor) + " PP" + std::to_string(pipeline);
  if (context > 1) out += " CP" + std::to_string(context);
  out += " DP" + std::to_string(data);
  if (virtual_stages > 1) out += " v" + std::to_string(virtual_stages);
  if (microbatch_group > 0) out += " g" + std::to_string(microbatch_group);
  out += " mb" + std::to_string(micro_batch) + " " + std::string(to_string(schedule));
  out += " ZeRO-" + std::to_string(zero_stage);
  if (recompute != Recompute::none) out += recompute == Recompute::full ? " full-rc" : " sel-rc";
  if (sequence_parallel) out += " SP";
  if (count_ends) out += " E+L";
  return out;
}

Scenario apply(const Scenario& base, const Candidate& c) {
  Scenario s = base;
  s.parallel.tensor = c.tensor;
  s.parallel.pipeline = c.pipeline;
  s.parallel.context = c.context;
  s.parallel.data = c.data;
  s.parallel.virtual_pipeline_stages = c.virtual_stages;
  s.parallel.schedule = c.schedule;
  s.parallel.zero_stage = c.zero_stage;
  s.parallel.sequence_parallel = c.sequence_parallel;
  s.training.micro_batch_size = c.micro_batch;
  s.training.recompute = c.recompute;
  if (c.microbatch_group > 0) s.parallel.microbatch_group_size_per_vp_stage = c.microbatch_group;
  if (c.count_ends)
    s.parallel.account_for_embedding_in_pipeline_split = s.parallel.account_for_loss_in_pipeline_split = true;
  // Never nn.DataParallel: wherever it runs (one node, data parallelism alone) DDP is faster and
  // device 0 holds less (docs/dataparallel.md), so the search proposes DDP.
  s.parallel.data_parallel_impl = DataParallelImpl::ddp;
  return s;
}

Candidate candidate_of(const Scenario& s) {
  Candidate c;
  c.tensor = s.parallel.tensor;
  c.pipeline = s.parallel.pipeline;
  c.context = s.parallel.context;
  c.data = s.parallel.data;
  c.virtual_stages = s.parallel.virtual_pipeline_stages;
  c.schedule = s.parallel.schedule;
  c.micro_batch = s.training.micro_batch_size;
  c.zero_stage = s.parallel.zero_stage;
  c.recompute = s.training.recompute;
  c.sequence_parallel = s.parallel.sequence_parallel;
  c.count_ends = s.parallel.account_for_embedding_in_pipeline_split && s.parallel.account_for_loss_in_pipeline_split;
  c.microbatch_group = s.parallel.microbatch_group_size_per_vp_stage;
  return c;
}

}  // namespace paralab
