// paralab — enumeration of candidate layouts.
#include "plan/search_space.hpp"

#include <algorithm>

#include "ir/schedule.hpp"
#include "ir/step_ir.hpp"

namespace paralab {

namespace {
std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}
}  // namespace

SearchSpace search_space(const Scenario& base, const SearchBounds& bounds) {
  const Provenance& pv = base.provenance;
  const int64_t devices = base.cluster.devices();
  SearchSpace sp;
  auto pin_or = [&](const char* key, int64_t value, std::vector<int64_t> free) {
    return pv.has(key) ? std::vector<int64_t>{value} : free;
  };
  sp.tensor = pin_or("parallel.tensor", base.parallel.tensor, divisors(devices));
  sp.pipeline = pin_or("parallel.pipeline", base.parallel.pipeline, divisors(devices));
  sp.context = pin_or("parallel.context", base.parallel.context, divisors(devices));
  sp.micro_batch = pin_or("training.micro_batch_size", base.training.micro_batch_size,
                          divisors(base.training.global_batch_size));
  sp.zero_stage = pin_or("parallel.zero_stage", base.parallel.zero_stage, {0, 1, 2, 3});
  if (pv.has("parallel.data")) sp.data = base.parallel.data;
  sp.recompute = pv.has("training.recompute") ? std::vector<Recompute>{base.training.recompute}
                                              : std::vector<Recompute>{Recompute::none, Recompute::selective, Recompute::full};
  sp.sequence_parallel = pv.has("parallel.sequence_parallel") ? std::vector<bool>{base.parallel.sequence_parallel}
                                                              : std::vector<bool>{false, true};
  sp.pin_virtual = pv.has("parallel.virtual_pipeline_stages");
  sp.virtual_stages = base.parallel.virtual_pipeline_stages;
  sp.pin_schedule = pv.has("parallel.schedule");
  sp.schedule = base.parallel.schedule;
  (void)bounds;
  return sp;
}

void enumerate(const Scenario& base, const SearchSpace& sp, const SearchBounds& bounds,
               const std::function<void(const Candidate&)>& visit, std::map<std::string, int64_t>& excluded) {
  const int64_t devices = base.cluster.devices();
  const int64_t max_tp = bounds.max_tensor > 0 ? bounds.max_tensor : nvlink_domain_devices(base);
  const bool tp_pinned = sp.tensor.size() == 1 && base.provenance.has("parallel.tensor");
  const bool mb_pinned = base.provenance.has("training.micro_batch_size");
  const bool cp_pinned = base.provenance.has("parallel.context");
  // A split the scenario sets is kept; otherwise, where pipeline does not divide the layers but
  // does with the embedding and loss counted as layers, the candidate counts them (Megatron-LM's
  // account_for_*_in_pipeline_split).
  const ParallelConfig& bp = base.parallel;
  const bool split_given = bp.account_for_embedding_in_pipeline_split || bp.account_for_loss_in_pipeline_split ||
                           bp.decoder_first_pipeline_num_layers > 0 || bp.decoder_last_pipeline_num_layers > 0 ||
                           !bp.pipeline_layout.empty();
  const int64_t L = base.model.num_layers;
  const bool group_pinned = base.provenance.has("parallel.microbatch_group_size_per_vp_stage");
  for (int64_t tp : sp.tensor)
    for (int64_t pp : sp.pipeline)
      for (int64_t cp : sp.context) {
        if (devices % (tp * pp * cp) != 0) continue;  // not a factorization of the cluster: not a layout
        const int64_t dp = devices / (tp * pp * cp);
        if (sp.data > 0 && dp != sp.data) continue;
        // Layouts outside the bounds are counted, not built.
        std::string why;
        if (!tp_pinned && tp > max_tp) why = "tensor parallel across nodes (--max-tensor)";
        else if (!cp_pinned && cp > 1 && base.model.seq_length / cp < bounds.min_context_tokens)
          why = "context chunks shorter than " + std::to_string(bounds.min_context_tokens) + " tokens (--min-context-tokens)";
        const bool count_ends = !split_given && pp > 1 && L % pp != 0 && (L + 2) % pp == 0;
        const int64_t split_layers =
            L + (count_ends ? 2 : bp.account_for_embedding_in_pipeline_split + bp.account_for_loss_in_pipeline_split);
        // Virtual stages: divisors of the layers per stage (validation rejects the rest).
        std::vector<int64_t> vs;
        if (sp.pin_virtual) vs = {sp.virtual_stages};
        else if (split_layers % pp == 0 && pp > 1)  // interleaving needs stages to interleave
          for (int64_t v = 1; v <= split_layers / pp; ++v)
            if ((split_layers / pp) % v == 0) vs.push_back(v);
        if (vs.empty()) vs = {1};
        for (int64_t v : vs) {
          std::vector<Schedule> scheds;
          if (sp.pin_schedule) scheds = {sp.schedule};
          else if (v > 1) scheds = {Schedule::interleaved};
          else scheds = {Schedule::gpipe, Schedule::one_f_one_b, Schedule::zb_h1, Schedule::zb_h2};
          if (pp == 1 && !sp.pin_schedule && v == 1) scheds = {Schedule::one_f_one_b};  // one stage: schedules coincide
          for (Schedule sched : scheds)
            for (int64_t mb : sp.micro_batch) {
              // Interleaving with micro-batches not a multiple of the pipeline: Megatron-LM's
              // smallest valid micro-batch group.
              int64_t group = 0;
              const int64_t per_rank = base.training.global_batch_size / std::max<int64_t>(1, mb * dp);
              if (sched == Schedule::interleaved && !group_pinned && per_rank % pp != 0)
                group = smallest_microbatch_group(per_rank, pp);
              for (int64_t z : sp.zero_stage)
                for (Recompute rc : sp.recompute) {
                  // Sharding over a data-parallel group of one is no sharding: ZeRO-0 stands for it.
                  if (z > 0 && dp * cp == 1 && !base.provenance.has("parallel.zero_stage")) continue;
                  for (bool seqp : sp.sequence_parallel) {
                    if (seqp && tp == 1) continue;  // sequence parallelism is a no-op without TP
                    std::string reason = why;
                    if (reason.empty() && !mb_pinned && mb > bounds.max_micro_batch)
                      reason = "micro-batch above " + std::to_string(bounds.max_micro_batch) + " (--max-micro-batch)";
                    if (reason.empty() && !sp.pin_virtual && v > bounds.max_virtual_stages)
                      reason = "more than " + std::to_string(bounds.max_virtual_stages) + " virtual stages (--max-virtual-stages)";
                    if (reason.empty() && !sp.pin_schedule && !bounds.schedules.empty() &&
                        std::find(bounds.schedules.begin(), bounds.schedules.end(), sched) == bounds.schedules.end())
                      reason = "schedule not in --schedules";
                    if (!reason.empty()) {
                      ++excluded[reason];
                      continue;
                    }
                    Candidate c;
                    c.tensor = tp;
                    c.pipeline = pp;
                    c.context = cp;
                    c.data = dp;
                    c.virtual_stages = v;
                    c.schedule = sched;
                    c.micro_batch = mb;
                    c.zero_stage = z;
                    c.recompute = rc;
                    c.sequence_parallel = seqp;
                    c.count_ends = count_ends;
                    c.microbatch_group = group;
                    visit(c);
                  }
                }
            }
        }
      }
}

}  // namespace paralab
